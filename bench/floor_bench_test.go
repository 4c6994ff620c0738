package bench_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// BenchmarkSMBesideFloor is sm's blocking ping-pong between two goroutines
// locked to the first two CPUs this process may use, beside the cache-line
// floor between the same CPUs (bench.LineFloor, measured once before the
// sizes): oneway-ns is half a round trip, x-floor its multiple of the
// floor, floor-ns and two-lines-ns the probe's one-line and line-per-
// direction figures. The box carries up to sm.BoxPayload bytes
// (docs/transports.md, Small messages); 1 KiB goes through a cell.
func BenchmarkSMBesideFloor(b *testing.B) {
	cpus, err := sys.AllowedCPUs()
	if err != nil || len(cpus) < 2 {
		b.Skipf("needs two CPUs to pin to (have %v, %v)", cpus, err)
	}
	floor, err := bench.LineFloor(cpus[:2], bench.FloorRuns, bench.FloorTrips)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{8, sm.BoxPayload, sm.BoxPayload + 8, 1024} {
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			a, c := smPair(b)
			// Buffers of their own pages: two small heap slices share a
			// line, which both goroutines would write with every message.
			sa, sc := pageBuffer(b, n), pageBuffer(b, n)
			oneWay := testutil.PairPingPong(b, func(i int) error { return sys.PinThread(cpus[i]) }, warm, a, c, sa, sc)
			b.ReportMetric(oneWay, "oneway-ns")
			b.ReportMetric(oneWay/floor.Median, "x-floor")
			b.ReportMetric(floor.Median, "floor-ns")
			b.ReportMetric(floor.TwoLines, "two-lines-ns")
		})
	}
}

// warm round trips open each size untimed: the pair's pages are
// committed and both goroutines polling.
const warm = 2000

// pageBuffer is n bytes from bench.Alloc: pages of their own.
func pageBuffer(b *testing.B, n int) []byte {
	buf, err := bench.Alloc(n)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bench.Free(buf) })
	return buf
}

// smPair is two sm endpoints of this process over an anonymous mapping,
// with the built-in parameters.
func smPair(b *testing.B) (*sm.Endpoint, *sm.Endpoint) {
	p := sm.DefaultParams()
	seg, err := sys.MapAnon(p.SegmentBytes(2), true)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sys.Unmap(seg) })
	pid := os.Getpid()
	var eps [2]*sm.Endpoint
	for r := range eps {
		env := transports.Env{Rank: r, Size: 2, PIDs: []int{pid, pid}, Segment: seg}
		if eps[r], err = sm.New(env, p, nil, "sm"); err != nil {
			b.Fatal(err)
		}
		ep := eps[r]
		b.Cleanup(func() { ep.Close() })
	}
	return eps[0], eps[1]
}
