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
// trips, and one way is half a round trip.
type Floor struct {
	CPUs   []int     `json:"cpus"`
	Trips  int       `json:"trips"`     // round trips per run
	Runs   []float64 `json:"runs_ns"`   // each run's one-way time in ns, in the order run
	Median float64   `json:"median_ns"` // the runs' median
}

// FloorRuns and FloorTrips are LineFloor's built-in runs and round trips
// per run: a few milliseconds in all at a floor of 100 ns.
const (
	FloorRuns  = 25
	FloorTrips = 20000
)

// floorWarmup round trips open every run untimed: the threads have
// started spinning and the line sits in one of the two caches.
const floorWarmup = 1000

// LineFloor measures the floor between cpus[0] and cpus[1] (the CPUs a
// pair of ranks is pinned to) in runs runs of trips round trips each. Both
// threads poll without pausing: the probe wants the hardware's cost,
// nothing of a transport's. It is in-process; the line's cost between
// processes sharing a mapping is the same.
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
	f := Floor{CPUs: cpus[:2:2], Trips: trips}
	for range runs {
		ns, err := bounce(word, cpus[0], cpus[1], trips)
		if err != nil {
			return Floor{}, err
		}
		f.Runs = append(f.Runs, float64(ns)/float64(2*trips))
	}
	sorted := slices.Sorted(slices.Values(f.Runs))
	f.Median = sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		f.Median = (sorted[len(sorted)/2-1] + f.Median) / 2
	}
	return f, nil
}

// bounce is one run: a thread on cpu a sends odd values of *word and
// waits for the next even one, which a thread on cpu b answers; it returns
// the nanoseconds of the timed round trips. Both goroutines end locked to
// their threads, which the runtime then discards with their affinity.
func bounce(word *uint64, a, b, trips int) (int64, error) {
	*word = 0
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
		go answer(word, b, total, ready)
		if err := <-ready; err != nil {
			done <- result{err: fmt.Errorf("cache-line floor: %w", err)}
			return
		}
		var start int64
		for k := uint64(0); k < total; k++ {
			if k == floorWarmup {
				start = nanotime()
			}
			sys.StoreRelease64(word, 2*k+1)
			for atomic.LoadUint64(word) != 2*k+2 {
			}
		}
		done <- result{ns: nanotime() - start}
	}()
	r := <-done
	return r.ns, r.err
}

// answer is bounce's thread on cpu: it reports on ready whether it is
// pinned, then answers each of total odd values with the next even one.
func answer(word *uint64, cpu int, total uint64, ready chan<- error) {
	runtime.LockOSThread()
	if err := sys.PinThread(cpu); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for v := uint64(1); v < 2*total; v += 2 {
		for atomic.LoadUint64(word) != v {
		}
		sys.StoreRelease64(word, v+1)
	}
}
