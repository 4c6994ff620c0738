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
