package cudaipc

import (
	"bytes"
	"testing"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/cuda/cudatest"
)

// The copy kernel on a real device: every size around the vector width and
// the grid's limits lands byte for byte, and leaves the bytes around the
// destination range alone. (No subtests: the context is bound to this
// goroutine's thread.)
func TestSMCopyKernelOnDevice(t *testing.T) {
	dev := cudatest.Device(t, 0)
	k, err := loadSMCopy(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	s := cudatest.Stream(t)

	const most = 3<<20 + 64
	src := cudatest.Alloc(t, dev, cuda.MemDevice, most)
	dst := cudatest.Alloc(t, dev, cuda.MemDevice, most+64)
	pattern := make([]byte, most)
	for i := range pattern {
		pattern[i] = byte(i*7 + i>>11)
	}
	if err := cuda.CopyHtoD(src.Ptr(), pattern); err != nil {
		t.Fatal(err)
	}
	const guard = 16 // bytes before the destination range
	got := make([]byte, most+64)
	for _, n := range []int{0, 1, 15, 16, 17, 4099, copyBlock * vectorBytes, copyBlock*vectorBytes + 5, 1<<20 + 7, most} {
		func() {
			if err := cuda.Memset(dst.Ptr(), 0xee, most+64); err != nil {
				t.Fatal(err)
			}
			if err := k.launch(dst.Ptr()+guard, src.Ptr(), n, s); err != nil {
				t.Fatal(err)
			}
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			if err := cuda.CopyDtoH(got, dst.Ptr()); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[guard:guard+n], pattern[:n]) {
				i := 0
				for got[guard+i] == pattern[i] {
					i++
				}
				t.Errorf("%d bytes: byte %d is %#x, want %#x", n, i, got[guard+i], pattern[i])
				return
			}
			for i, b := range append(got[:guard:guard], got[guard+n:guard+n+32]...) {
				if b != 0xee {
					t.Errorf("%d bytes: byte %d outside the copy changed to %#x", n, i, b)
					return
				}
			}
		}()
	}
}
