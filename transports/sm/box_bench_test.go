package sm

import (
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
)

// benchCPUs are the CPUs this process may use, read before any benchmark
// pins a thread: a benchmark's later runs start on the thread an earlier
// run pinned.
var benchCPUs = sync.OnceValues(sys.AllowedCPUs)

// pinnedPair is what the in-process ping-pongs below share: pin puts side
// i's goroutine on the i-th of the first two CPUs this process may use
// (the benchmark skips without two), and page is a fresh page for the
// lines they bounce, unmapped when the benchmark ends.
func pinnedPair(b *testing.B) (pin func(side int) error, page []byte) {
	b.Helper()
	cpus, err := benchCPUs()
	if err != nil || len(cpus) < 2 {
		b.Skipf("needs two CPUs to pin to (have %v, %v)", cpus, err)
	}
	page, err = sys.MapAnon(sys.PageSize, true)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sys.Unmap(page) })
	return func(side int) error { return sys.PinThread(cpus[side]) }, page
}

// BenchmarkBoxAlone ping-pongs 8-byte messages through a bare fast box
// (put, due, taken: no engine around it) between two goroutines pinned to
// the first two CPUs this process may use: what the engine's box path
// could reach, to set beside bench's BenchmarkSMBesideFloor (the engine)
// and its floor-ns (one line). oneway-ns is half a round trip. Each
// side's box view and buffer sit on lines of their own: the Go heap puts
// two small objects side by side, and a line both goroutines write for
// their own state would move with every message beside the box's
// (sharing them more than doubled oneway-ns on a 1 x H200 host).
func BenchmarkBoxAlone(b *testing.B) {
	pin, seg := pinnedPair(b)
	words := (*[boxBytes / 8]uint64)(unsafe.Pointer(&seg[boxBytes]))
	// Each side's state and buffer: a line each, a prefetch pair apart.
	type side struct {
		box box
		buf [8]byte
		_   [4*cacheLine - unsafe.Sizeof(box{}) - 8]byte
	}
	sides := (*[2]side)(unsafe.Pointer(&seg[4*cacheLine]))
	sides[0].box, sides[1].box = box{words: words, mine: 1}, box{words: words}
	lo, hi := &sides[0].box, &sides[1].box
	lobuf, hibuf := sides[0].buf[:], sides[1].buf[:]
	const warm = 1000
	take := func(x *box, buf []byte) {
		for {
			if n, ok := x.due(0); ok {
				copySmall(buf, x.payload()[:n])
				x.taken()
				return
			}
			sys.PollFence()
		}
	}
	oneWay := testutil.PingPong(b, pin, warm, func() error {
		lo.put(lobuf, 0)
		take(lo, lobuf)
		return nil
	}, func() error {
		take(hi, hibuf)
		hi.put(hibuf, 0)
		return nil
	})
	b.ReportMetric(oneWay, "oneway-ns")
}

// BenchmarkWordAlone is BoxAlone's floor in its own harness: the same two
// pinned goroutines and calls per message, bouncing one sequence word
// where BoxAlone moves a box message (header, payload, the checks of
// due). BoxAlone's oneway-ns over this one is what the box's protocol
// costs; this one over bench's floor-ns (a bare loop) what the harness
// costs (docs/performance.md, Copies in and out of the box).
func BenchmarkWordAlone(b *testing.B) {
	pin, seg := pinnedPair(b)
	word := (*uint64)(unsafe.Pointer(&seg[boxBytes]))
	// Each side's count on a line of its own, a prefetch pair apart.
	type side struct {
		n uint64
		_ [4*cacheLine - 8]byte
	}
	sides := (*[2]side)(unsafe.Pointer(&seg[4*cacheLine]))
	await := func(v uint64) {
		for atomic.LoadUint64(word) != v {
			sys.PollFence()
		}
	}
	lo, hi := &sides[0].n, &sides[1].n
	oneWay := testutil.PingPong(b, pin, 1000, func() error {
		*lo += 2
		sys.StoreRelease64(word, *lo-1)
		await(*lo)
		return nil
	}, func() error {
		*hi += 2
		await(*hi - 1)
		sys.StoreRelease64(word, *hi)
		return nil
	})
	b.ReportMetric(oneWay, "oneway-ns")
}
