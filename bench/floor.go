package bench

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/gotune/gotune/internal/sys"
)

// Floor is what one cache line costs to move between two CPUs, one way:
// the floor under any small message's latency between ranks pinned there
// (a message must at least hand its sequence word over). Two threads
// pinned to the CPUs bounce one sequence word; a run times Trips round
// trips, and one way is half a round trip. Runs poll in two ways in turn,
// flat out and with a load fence between polls (sys.PollFence), and the
// floor is the cheaper way's median: which is cheaper depends on the
// cores (flat out doubled the line's cost on the development VM's AMD
// cores some of the time).
//
// TwoLines is the same exchange with a line per direction, each written
// by one thread and polled by the other, as a pair of one-way channels
// (sm's FIFOs) must move it: polled the cheaper way, runs as many. Why
// apart: a line that both threads write moves once a way, its reader
// keeping it for its reply; one per direction also has to be taken back
// by its writer, and on the development VM that cost 1.8x the one line.
type Floor struct {
	CPUs     []int     `json:"cpus"`
	Trips    int       `json:"trips"`     // round trips per run
	Runs     []float64 `json:"runs_ns"`   // each run's one-way time in ns, in the order run: flat out, fenced, flat out...
	Median   float64   `json:"median_ns"` // the cheaper way's median
	Fenced   bool      `json:"fenced"`    // the fenced polls were the cheaper way
	TwoRuns  []float64 `json:"two_lines_runs_ns,omitempty"`
	TwoLines float64   `json:"two_lines_ns,omitempty"` // TwoRuns' median
}

// FloorRuns and FloorTrips are LineFloor's built-in runs (of each way of
// polling) and round trips per run: a tenth of a second in all at a floor
// of 100 ns.
const (
	FloorRuns  = 25
	FloorTrips = 20000
)

// floorWarmup round trips open every run untimed: the threads have
// started spinning and the line sits in one of the two caches.
const floorWarmup = 1000

// LineFloor measures the floor between cpus[0] and cpus[1] (the CPUs a
// pair of ranks is pinned to) in runs runs of each way of polling, of
// trips round trips each. Neither way pauses: the probe wants the
// hardware's cost, nothing of a transport's. It is in-process; the line's
// cost between processes sharing a mapping is the same.
func LineFloor(cpus []int, runs, trips int) (Floor, error) {
	if len(cpus) < 2 || cpus[0] == cpus[1] {
		return Floor{}, fmt.Errorf("cache-line floor: needs two distinct CPUs, one per rank (have %v)", cpus)
	}
	if runs < 1 || trips < 1 {
		return Floor{}, fmt.Errorf("cache-line floor: %d runs of %d round trips", runs, trips)
	}
	page, err := sys.MapAnon(sys.PageSize, true)
	if err != nil {
		return Floor{}, fmt.Errorf("cache-line floor: %w", err)
	}
	defer sys.Unmap(page)
	word := (*uint64)(unsafe.Pointer(&page[0]))
	// The second direction's line: 256 bytes on, past the adjacent-line
	// prefetcher's 128-byte pairs.
	back := (*uint64)(unsafe.Pointer(&page[256]))
	f := Floor{CPUs: cpus[:2:2], Trips: trips}
	var ways [2][]float64 // flat out, fenced
	for range runs {
		for way, fenced := range []bool{false, true} {
			ns, err := bounce(word, word, cpus[0], cpus[1], trips, fenced)
			if err != nil {
				return Floor{}, err
			}
			oneWay := float64(ns) / float64(2*trips)
			f.Runs = append(f.Runs, oneWay)
			ways[way] = append(ways[way], oneWay)
		}
	}
	flat, fenced := median(ways[0]), median(ways[1])
	f.Median, f.Fenced = min(flat, fenced), fenced < flat
	for range runs {
		ns, err := bounce(word, back, cpus[0], cpus[1], trips, f.Fenced)
		if err != nil {
			return Floor{}, err
		}
		f.TwoRuns = append(f.TwoRuns, float64(ns)/float64(2*trips))
	}
	f.TwoLines = median(f.TwoRuns)
	return f, nil
}

func median(x []float64) float64 {
	s := slices.Sorted(slices.Values(x))
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + m) / 2
	}
	return m
}

// bounce is one run: a thread on cpu a sends odd values through *out
// and waits for the next even one on *in, which a thread on cpu b
// answers, both polling fenced or flat out (out and in one word: one
// line bouncing); it returns the nanoseconds of the timed round trips.
// Both goroutines end locked to their threads, which the runtime then
// discards with their affinity.
func bounce(out, in *uint64, a, b, trips int, fenced bool) (int64, error) {
	*out, *in = 0, 0
	total := uint64(floorWarmup + trips)
	type result struct {
		ns  int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := sys.PinThread(a); err != nil {
			done <- result{err: fmt.Errorf("cache-line floor: %w", err)}
			return
		}
		ready := make(chan error, 1)
		go answer(out, in, b, total, fenced, ready)
		if err := <-ready; err != nil {
			done <- result{err: fmt.Errorf("cache-line floor: %w", err)}
			return
		}
		var start int64
		for k := uint64(0); k < total; k++ {
			if k == floorWarmup {
				start = nanotime()
			}
			sys.StoreRelease64(out, 2*k+1)
			await(in, 2*k+2, fenced)
		}
		done <- result{ns: nanotime() - start}
	}()
	r := <-done
	return r.ns, r.err
}

// answer is bounce's thread on cpu: it reports on ready whether it is
// pinned, then answers each of total odd values on *out with the next
// even one on *in.
func answer(out, in *uint64, cpu int, total uint64, fenced bool, ready chan<- error) {
	runtime.LockOSThread()
	if err := sys.PinThread(cpu); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for v := uint64(1); v < 2*total; v += 2 {
		await(out, v, fenced)
		sys.StoreRelease64(in, v+1)
	}
}

// await polls *word until it holds v.
func await(word *uint64, v uint64, fenced bool) {
	if !fenced {
		for atomic.LoadUint64(word) != v {
		}
		return
	}
	for atomic.LoadUint64(word) != v {
		sys.PollFence()
	}
}
