package nccl

import (
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
)

// fake builds testdata/fakenccl.c as a libnccl.so.2 and returns its path.
func fake(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	testutil.SkipUnless(t, "cc", err)
	so := filepath.Join(t.TempDir(), "libnccl.so.2")
	if out, err := exec.Command(cc, "-O2", "-shared", "-fPIC", "-o", so, "testdata/fakenccl.c").CombinedOutput(); err != nil {
		t.Fatalf("build the fake NCCL: %v\n%s", err, out)
	}
	return so
}

// The binding calls NCCL's entry points with their C signatures: the
// version decoded, the unique id written by NCCL and handed back whole by
// pointer, the rank and size in their places, errors in NCCL's words.
func TestBindingAgainstAFakeNCCL(t *testing.T) {
	so := fake(t)
	l, err := open(slices.Values([]string{"/nonexistent/libnccl.so.2", so}))
	if err != nil {
		t.Fatal(err)
	}
	if l.Path != so || l.Version.String() != "2.28.9" {
		t.Fatalf("loaded %s, NCCL %s; want %s, 2.28.9", l.Path, l.Version, so)
	}
	id, err := l.NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range id {
		if b != byte(i*7+1) {
			t.Fatalf("unique id byte %d: %#x, want %#x", i, b, byte(i*7+1))
		}
	}
	id[127] = 0xee
	c, err := l.InitRank(4, 3, id)
	if err != nil || c != 0x1003 {
		t.Fatalf("InitRank = %#x, %v; want the fake's comm 0x1003", c, err)
	}
	h, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatal(err)
	}
	last, err := purego.Dlsym(h, "fake_last")
	if err != nil {
		t.Fatal(err)
	}
	var nranks, rank, nid int32
	var config uintptr
	var got UniqueID
	purego.SyscallN(last, uintptr(unsafe.Pointer(&nranks)), uintptr(unsafe.Pointer(&rank)), uintptr(unsafe.Pointer(&nid)),
		uintptr(unsafe.Pointer(&config)), uintptr(unsafe.Pointer(&got)))
	if nranks != 4 || rank != 3 || nid != 1 || config != 0 || got != id {
		t.Errorf("NCCL was given %d ranks, rank %d, %d ids, config %#x, id ending %#x; want 4, 3, 1, NULL, %#x", nranks, rank, nid, config, got[127], id[127])
	}
	if err := l.Destroy(c); err != nil {
		t.Error(err)
	}
	_, err = l.InitRank(2, 5, id)
	if e := (*Error)(nil); !errors.As(err, &e) || e.Code != 4 || e.Msg != "invalid argument" || !strings.Contains(err.Error(), "rank 5 of 2") {
		t.Errorf("a bad rank: %v, want NCCL error 4 (invalid argument) naming the rank", err)
	}

	set, err := purego.Dlsym(h, "fake_set_version")
	if err != nil {
		t.Fatal(err)
	}
	purego.SyscallN(set, 22204)
	defer purego.SyscallN(set, 22809)
	if _, err := open(slices.Values([]string{so})); !errors.Is(err, sys.ErrNotSupported) || !strings.Contains(err.Error(), "is NCCL 2.22.4; gotune needs 2.23.0") {
		t.Errorf("NCCL 2.22.4: %v, want not supported, too old", err)
	}
}

// Without a library the error says what was tried and how to point at one.
func TestNoLibraryIsNotSupported(t *testing.T) {
	_, err := open(slices.Values([]string{"/nonexistent/libnccl.so.2"}))
	if !errors.Is(err, sys.ErrNotSupported) || !strings.Contains(err.Error(), LibraryEnv) || !strings.Contains(err.Error(), "/nonexistent/libnccl.so.2") {
		t.Errorf("got %v, want not supported naming the path and %s", err, LibraryEnv)
	}
	t.Setenv(LibraryEnv, "/opt/nccl/lib/libnccl.so.2")
	if got := slices.Collect(Candidates()); !slices.Equal(got, []string{"/opt/nccl/lib/libnccl.so.2"}) {
		t.Errorf("with %s set: candidates %v", LibraryEnv, got)
	}
}

// Each queued operation reaches NCCL with its arguments in C's order, and
// NCCL's refusal comes back naming the operation.
func TestOperationsPassTheirArguments(t *testing.T) {
	so := fake(t)
	l, err := open(slices.Values([]string{so}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatal(err)
	}
	callSym, err := purego.Dlsym(h, "fake_call")
	if err != nil {
		t.Fatal(err)
	}
	last := func() (string, []uintptr) {
		var op [32]byte
		var args [8]uintptr
		purego.SyscallN(callSym, uintptr(unsafe.Pointer(&op[0])), uintptr(unsafe.Pointer(&args[0])))
		return sys.GoString(&op[0]), args[:]
	}
	const c, stream = Comm(0x1001), uintptr(0x5000)
	for _, tc := range []struct {
		op   string
		call func() error
		want []uintptr
	}{
		{"send", func() error { return l.Send(0xa000, 4096, Int8, 1, c, stream) }, []uintptr{0xa000, 4096, 0, 1, 0x1001, 0x5000}},
		{"recv", func() error { return l.Recv(0xb000, 64, Int8, 0, c, stream) }, []uintptr{0xb000, 64, 0, 0, 0x1001, 0x5000}},
		{"allreduce", func() error { return l.AllReduce(0xa000, 0xb000, 256, Float32, Sum, c, stream) }, []uintptr{0xa000, 0xb000, 256, 7, 0, 0x1001, 0x5000}},
		{"allgather", func() error { return l.AllGather(0xa000, 0xb000, 128, Float32, c, stream) }, []uintptr{0xa000, 0xb000, 128, 7, 0x1001, 0x5000}},
		{"reducescatter", func() error { return l.ReduceScatter(0xa000, 0xb000, 32, Float32, Sum, c, stream) }, []uintptr{0xa000, 0xb000, 32, 7, 0, 0x1001, 0x5000}},
		{"broadcast", func() error { return l.Broadcast(0xa000, 0xb000, 16, Int8, 1, c, stream) }, []uintptr{0xa000, 0xb000, 16, 0, 1, 0x1001, 0x5000}},
		{"groupstart", l.GroupStart, []uintptr{0}},
		{"groupend", l.GroupEnd, []uintptr{0}},
		{"abort", func() error { return l.Abort(c) }, []uintptr{0x1001}},
		{"asyncerror", func() error { return l.AsyncError(c) }, []uintptr{0x1001}},
	} {
		if err := tc.call(); err != nil {
			t.Errorf("%s: %v", tc.op, err)
			continue
		}
		op, args := last()
		if op != tc.op || !slices.Equal(args[:len(tc.want)], tc.want) {
			t.Errorf("%s reached NCCL as %s%#x; want %#x", tc.op, op, args[:len(tc.want)], tc.want)
		}
	}
	if err := l.Send(0xa000, 1, Int8, -1, c, stream); err == nil || !strings.Contains(err.Error(), "ncclSend(1 elements to rank -1)") || !strings.Contains(err.Error(), "invalid argument") {
		t.Errorf("a refused send: %v, want NCCL's invalid argument naming the call", err)
	}
	if err := l.AsyncError(Comm(0xbad)); err == nil || !strings.Contains(err.Error(), "NCCL error 6") {
		t.Errorf("a communicator with a recorded error: %v, want NCCL error 6", err)
	}
}
