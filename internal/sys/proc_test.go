package sys

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

// Cross-memory copies with segment boundaries that do not line up between
// the local and remote sides, in both directions, against our own process.
func TestCrossMemorySegmentsOfDifferentShapes(t *testing.T) {
	src := make([]byte, 10000)
	for i := range src {
		src[i] = byte(i*7 + i>>8)
	}
	cases := []struct{ local, remote []int }{
		{[]int{10000}, []int{10000}},
		{[]int{1, 999, 9000}, []int{5000, 5000}},
		{[]int{3000, 3000, 4000}, []int{1, 1, 1, 9997}},
	}
	for _, c := range cases {
		for _, write := range []bool{false, true} {
			dst := make([]byte, len(src))
			// local buffers are views of dst (read) or src (write)
			base, other := dst, src
			if write {
				base, other = src, dst
			}
			var local [][]byte
			off := 0
			for _, n := range c.local {
				local = append(local, base[off:off+n])
				off += n
			}
			var remote []RemoteSegment
			off = 0
			for _, n := range c.remote {
				remote = append(remote, RemoteSegment{Addr: AddressOf(other[off:]), Len: n})
				off += n
			}
			var n int
			var err error
			if write {
				n, err = CopyToProcess(os.Getpid(), local, remote)
			} else {
				n, err = CopyFromProcess(os.Getpid(), local, remote)
			}
			if err != nil || n != len(src) || !bytes.Equal(dst, src) {
				t.Errorf("local %v remote %v write=%v: n=%d err=%v equal=%v", c.local, c.remote, write, n, err, bytes.Equal(dst, src))
			}
		}
	}
}

func TestCrossMemoryLengthMismatchAndMissingProcess(t *testing.T) {
	b := make([]byte, 8)
	if _, err := CopyFromProcess(os.Getpid(), [][]byte{b}, []RemoteSegment{{Addr: AddressOf(b), Len: 4}}); err == nil {
		t.Error("length mismatch accepted")
	}
	_, err := CopyFromProcess(1<<30, [][]byte{b}, []RemoteSegment{{Addr: AddressOf(b), Len: 8}})
	if err == nil || errors.Is(err, ErrNotSupported) {
		t.Errorf("missing process: got %v, want a plain error (ESRCH)", err)
	}
}

func TestNotSupportedMatches(t *testing.T) {
	err := NotSupported("xpmem", "module not loaded", os.ErrNotExist)
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%v: does not match both ErrNotSupported and its cause", err)
	}
}

// Both copy routines copy exactly min(len) bytes at every alignment of
// either side (CopyStream splits off an unaligned head and a short tail
// around its streaming body) and leave the bytes around dst alone.
func TestCopyRoutines(t *testing.T) {
	routines := []struct {
		name string
		copy func(dst, src []byte) int
	}{{"movsb", CopyMovsb}, {"stream", CopyStream}}
	sizes := []int{0, 1, 63, 64, 255, 256, 257, 4097, 1<<20 + 5}
	offsets := []struct{ dst, src int }{{0, 0}, {1, 0}, {0, 3}, {17, 40}, {63, 63}}
	for _, r := range routines {
		for _, n := range sizes {
			for _, o := range offsets {
				src := make([]byte, o.src+n)
				for i := range src {
					src[i] = byte(i*31 + 7)
				}
				buf := bytes.Repeat([]byte{0xEE}, o.dst+n+64)
				got := r.copy(buf[o.dst:o.dst+n], src[o.src:])
				if got != n || !bytes.Equal(buf[o.dst:o.dst+n], src[o.src:]) {
					t.Errorf("%s n=%d dst+%d src+%d: copied %d, equal %v", r.name, n, o.dst, o.src, got, bytes.Equal(buf[o.dst:o.dst+n], src[o.src:]))
				}
				if !allGuard(buf[:o.dst]) || !allGuard(buf[o.dst+n:]) {
					t.Errorf("%s n=%d dst+%d src+%d: wrote outside dst", r.name, n, o.dst, o.src)
				}
			}
		}
	}
}

func allGuard(b []byte) bool {
	for _, c := range b {
		if c != 0xEE {
			return false
		}
	}
	return true
}

// A watch sees our own process alive, a child alive until it exits (before
// it is reaped: a zombie counts as exited), and checking allocates nothing.
func TestProcessWatch(t *testing.T) {
	self, err := WatchProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	if self.Exited() {
		t.Fatal("own process reported exited")
	}
	if n := testing.AllocsPerRun(100, func() { self.Exited() }); n != 0 {
		t.Errorf("Exited allocates %v times per call", n)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The child blocks reading the pipe until we close our end.
	child, err := os.StartProcess("/bin/sh", []string{"sh", "-c", "read x"}, &os.ProcAttr{Files: []*os.File{r, os.Stdout, os.Stderr}})
	if err != nil {
		t.Skipf("no /bin/sh: %v", err)
	}
	watch, err := WatchProcess(child.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	if watch.Exited() {
		t.Fatal("running child reported exited")
	}
	w.Close()
	if err := WaitProcessExit(child.Pid, time.Minute); err != nil {
		t.Fatal(err)
	}
	if !watch.Exited() {
		t.Error("exited (not yet reaped) child reported running")
	}
	if _, err := child.Wait(); err != nil {
		t.Fatal(err)
	}
	if !watch.Exited() {
		t.Error("reaped child reported running")
	}
	if Errno(fmt.Errorf("wrapped: %w", ErrnoError(3))) != 3 || ErrnoError(0) != nil || Errno(errors.New("plain")) != 0 {
		t.Error("errno round trip")
	}
}
