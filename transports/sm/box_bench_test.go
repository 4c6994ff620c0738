package sm

import (
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/gotune/gotune/internal/sys"
)

// benchCPUs are the CPUs this process may use, read before any benchmark
// pins a thread: a benchmark's later runs start on the thread an earlier
// run pinned.
var benchCPUs = sync.OnceValues(sys.AllowedCPUs)

// BenchmarkBoxAlone ping-pongs 8-byte messages through a bare fast box
// (put, due, taken: no engine around it) between two goroutines pinned to
// the first two CPUs this process may use: what the engine's box path
// could reach, to set beside bench's BenchmarkSMBesideFloor (the engine)
// and its floor-ns (one line). oneway-ns is half a round trip. Both
// goroutines stay locked to their threads, which the runtime discards
// with their affinity when the goroutines end.
func BenchmarkBoxAlone(b *testing.B) {
	cpus, err := benchCPUs()
	if err != nil || len(cpus) < 2 {
		b.Skipf("needs two CPUs to pin to (have %v, %v)", cpus, err)
	}
	seg, err := sys.MapAnon(sys.PageSize, true)
	if err != nil {
		b.Fatal(err)
	}
	defer sys.Unmap(seg)
	words := (*[boxBytes / 8]uint64)(unsafe.Pointer(&seg[boxBytes]))
	lo, hi := box{words: words, mine: 1}, box{words: words}
	const warm = 1000
	take := func(x *box, buf []byte) {
		for {
			if n, ok := x.due(0); ok {
				copy(buf, x.payload()[:n])
				x.taken()
				return
			}
			sys.PollFence()
		}
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := sys.PinThread(cpus[1]); err != nil {
			done <- err
			return
		}
		buf := make([]byte, 8)
		for range warm + b.N {
			take(&hi, buf)
			hi.put(buf, 0)
		}
		done <- nil
	}()
	runtime.LockOSThread()
	if err := sys.PinThread(cpus[0]); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 8)
	for i := range warm + b.N {
		if i == warm {
			b.ResetTimer()
		}
		lo.put(buf, 0)
		take(&lo, buf)
	}
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "oneway-ns")
}
