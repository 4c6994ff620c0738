package cudaipc

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/cuda/cudatest"
)

// relayOne rings r for one message and spins until it is done, failing
// after 10 s (a relay that never answers: the block did not start or lost
// the bell).
func relayOne(t testing.TB, r *relay, dst, src uintptr, n int) {
	number, err := r.ring(dst, src, n)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; !r.done(number); i++ {
		if i%1024 == 0 && time.Now().After(deadline) {
			t.Fatalf("relay message %d not done after 10 s", number)
		}
	}
}

// The resident relay on a real device: one kernel copies message after
// message, aligned and not, each byte for byte and nothing around it, and
// ends when told. (No subtests: the context is bound to this goroutine's
// thread.)
func TestRelayCopiesOnDevice(t *testing.T) {
	dev := cudatest.Device(t, 0)
	r, err := startRelay()
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			r.stop()
		}
	}()
	const most, guard = 8192, 16
	src := cudatest.Alloc(t, dev, cuda.MemDevice, most+guard)
	dst := cudatest.Alloc(t, dev, cuda.MemDevice, most+4*guard)
	pattern := make([]byte, most+guard)
	got := make([]byte, most+4*guard)
	for round := range 3 { // the same sizes again: a source rewritten between messages
		for i := range pattern {
			pattern[i] = byte(i*7 + round*31 + i>>9)
		}
		if err := cuda.CopyHtoD(src.Ptr(), pattern); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 8, 15, 16, 17, 1024, 4099, most} {
			for _, shift := range []int{0, 3} { // 16-byte aligned ends, then bytes
				if err := cuda.Memset(dst.Ptr(), 0xee, len(got)); err != nil {
					t.Fatal(err)
				}
				relayOne(t, r, dst.Ptr()+guard+uintptr(shift), src.Ptr()+uintptr(shift), n)
				if err := cuda.CopyDtoH(got, dst.Ptr()); err != nil {
					t.Fatal(err)
				}
				at := guard + shift
				if want := pattern[shift : shift+n]; !bytes.Equal(got[at:at+n], want) {
					t.Fatalf("round %d, %d bytes from offset %d: wrong bytes landed", round, n, shift)
				}
				for i, b := range append(got[:at:at], got[at+n:at+n+guard]...) {
					if b != 0xee {
						t.Fatalf("round %d, %d bytes from offset %d: byte %d outside the copy changed to %#x", round, n, shift, i, b)
					}
				}
			}
		}
	}
	stopped = true
	if err := r.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// BenchmarkRelay is a small device-to-device message through the resident
// relay, from the host's ring until the host sees it done: to set beside
// internal/cuda's BenchmarkSmallCopyDone (the same through a copy engine)
// and BenchmarkGPUSignal (the bus's round trip with no copy).
func BenchmarkRelay(b *testing.B) {
	for _, size := range []int{8, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			dev := cudatest.Device(b, 0)
			src := cudatest.Alloc(b, dev, cuda.MemDevice, size)
			dst := cudatest.Alloc(b, dev, cuda.MemDevice, size)
			r, err := startRelay()
			if err != nil {
				b.Fatal(err)
			}
			relayOne(b, r, dst.Ptr(), src.Ptr(), size) // the block is up
			b.ResetTimer()
			for range b.N {
				relayOne(b, r, dst.Ptr(), src.Ptr(), size)
			}
			b.StopTimer()
			if err := r.stop(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// A message the bell's 48-bit words cannot carry is refused, not rung.
func TestRelayRefusesWideWords(t *testing.T) {
	r := &relay{words: new(relayWords)}
	for _, tc := range []struct {
		dst, src uintptr
		n        int
	}{{1 << 48, 0, 8}, {0, 1 << 50, 8}, {0, 0, relayStop}, {0, 0, -1}} {
		if _, err := r.ring(tc.dst, tc.src, tc.n); err == nil {
			t.Errorf("ring(%#x, %#x, %d) accepted", tc.dst, tc.src, tc.n)
		}
	}
	if *r.words != (relayWords{}) || r.last != 0 {
		t.Errorf("a refused message changed the bell: %+v, last %d", *r.words, r.last)
	}
}
