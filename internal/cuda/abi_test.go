package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ebitengine/purego"
)

// abiSource declares C functions of the driver's struct-by-value shapes, so
// the hand-placed System V arguments are checked against a real C compiler's
// idea of the ABI, with no GPU.
const abiSource = `
typedef struct { char reserved[64]; } handle64;
typedef struct { int type; int id; } location;

static unsigned long long sum(handle64 h) {
	unsigned long long s = 0;
	for (int i = 0; i < 64; i++) s = s * 131 + (unsigned char)h.reserved[i];
	return s;
}

/* cuIpcOpenMemHandle_v2's shape: the checksum goes out, the flags come back. */
int open_mem(unsigned long long *pdptr, handle64 h, unsigned int flags) {
	*pdptr = sum(h);
	return (int)flags;
}

/* cuIpcOpenEventHandle's shape. */
int open_event(void **ev, handle64 h) {
	*ev = (void *)sum(h);
	return 600;
}

/* cuMemAdvise_v2's shape: every argument folded into the result. */
static unsigned long long last;
int advise(unsigned long long ptr, unsigned long n, int advice, location loc) {
	last = ptr ^ (n << 1);
	return advice * 1000000 + loc.type * 10000 + (loc.id & 0xffff);
}
unsigned long long advise_last(void) { return last; }
`

func buildABILib(t *testing.T) uintptr {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		if cc, err = exec.LookPath("cc"); err != nil {
			t.Skip("no C compiler to check the ABI against")
		}
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "abi.c")
	lib := filepath.Join(dir, "libabi.so")
	if err := os.WriteFile(src, []byte(abiSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-O2", "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { purego.Dlclose(h) })
	return h
}

func sym(t *testing.T, h uintptr, name string) uintptr {
	t.Helper()
	p, err := purego.Dlsym(h, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func checksum(h *[IPCHandleSize]byte) uint64 {
	var s uint64
	for _, c := range h {
		s = s*131 + uint64(c)
	}
	return s
}

func TestStructByValueABI(t *testing.T) {
	lib := buildABILib(t)
	var h [IPCHandleSize]byte
	for i := range h {
		h[i] = byte(7*i + 3)
	}

	var p uintptr
	if r := callOpenMemHandle(sym(t, lib, "open_mem"), &p, &h, 0x1234); uint32(r) != 0x1234 {
		t.Errorf("open_mem returned %#x: flags not in RSI", uint32(r))
	}
	if uint64(p) != checksum(&h) {
		t.Errorf("open_mem saw checksum %#x, want %#x: handle not on the stack as class MEMORY", p, checksum(&h))
	}

	var ev uintptr
	if r := callOpenEventHandle(sym(t, lib, "open_event"), &ev, &h); uint32(r) != CodeNotReady {
		t.Errorf("open_event returned %d", uint32(r))
	}
	if uint64(ev) != checksum(&h) {
		t.Errorf("open_event saw checksum %#x, want %#x", ev, checksum(&h))
	}

	advise, last := sym(t, lib, "advise"), sym(t, lib, "advise_last")
	for _, tc := range []struct {
		loc  Location
		want int32
	}{
		{Location{Type: LocationDevice, ID: 1}, 3*1000000 + 1*10000 + 1},
		{Location{Type: LocationHost}, 3*1000000 + 2*10000},
		{Location{Type: LocationHostNUMA, ID: 0xbeef}, 3*1000000 + 3*10000 + 0xbeef},
		{Location{Type: LocationDevice, ID: -1}, 3*1000000 + 1*10000 + 0xffff},
	} {
		r := callMemAdvise(advise, 0xabc000, 4096, AdviseSetPreferredLocation, tc.loc)
		if int32(uint32(r)) != tc.want {
			t.Errorf("advise %+v returned %d, want %d", tc.loc, int32(uint32(r)), tc.want)
		}
		if l, _, _ := purego.SyscallN(last); l != 0xabc000^(4096<<1) {
			t.Errorf("advise saw ptr/count %#x", l)
		}
	}
}

func TestHandleWordsAndLocationWord(t *testing.T) {
	var h [IPCHandleSize]byte
	for i := range h {
		h[i] = byte(i)
	}
	w := handleWords(&h)
	if w[0] != 0x0706050403020100 || w[7] != 0x3f3e3d3c3b3a3938 {
		t.Errorf("words %#x", w)
	}
	for _, tc := range []struct {
		loc  Location
		want uintptr
	}{
		{Location{Type: LocationDevice, ID: 0}, 0x1},
		{Location{Type: LocationDevice, ID: 3}, 0x3_00000001},
		{Location{Type: LocationHost, ID: 0}, 0x2},
		{Location{Type: LocationDevice, ID: -1}, 0xffffffff_00000001},
	} {
		if got := tc.loc.word(); got != tc.want {
			t.Errorf("%+v: %#x, want %#x", tc.loc, got, tc.want)
		}
	}
}

func TestIPCHandleText(t *testing.T) {
	var h IPCMemHandle
	for i := range h {
		h[i] = byte(255 - i)
	}
	back, err := ParseIPCMemHandle(h.String())
	if err != nil || back != h {
		t.Fatalf("round trip: %v", err)
	}
	ev, err := ParseIPCEventHandle(IPCEventHandle(h).String())
	if err != nil || ev != IPCEventHandle(h) {
		t.Fatalf("event round trip: %v", err)
	}
	for _, bad := range []string{"", "zz", h.String()[:126], h.String() + "00"} {
		if _, err := ParseIPCMemHandle(bad); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}

// The calls on hot paths go through call, which must not allocate: check it
// against a libc function.
func TestCallDoesNotAllocate(t *testing.T) {
	libc, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Skip(err)
	}
	labs := sym(t, libc, "labs")
	var x uintptr = 5
	if r := call(labs, ^uintptr(41)); r != 42 {
		t.Fatalf("labs(-42) = %d", r)
	}
	if n := testing.AllocsPerRun(200, func() { call(labs, x, 1, 2, 3) }); n != 0 {
		t.Errorf("call allocates %v times per call", n)
	}
	var a Args
	if n := testing.AllocsPerRun(200, func() { a.SetPtr(0, x).Set(1, 2).SetFloat32(2, 1.5) }); n != 0 {
		t.Errorf("Args allocates %v times per launch", n)
	}
}
