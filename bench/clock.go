package bench

import (
	"slices"
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's monotonic clock: no wall-clock read, no
// allocation. It is a documented linkname target.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// clockCost estimates what one nanotime call adds to a timed iteration
// (the median over batches), so per-iteration samples can be corrected.
func clockCost() int64 {
	const batches, calls = 31, 1000
	per := make([]int64, batches)
	for b := range per {
		t0 := nanotime()
		for range calls {
			nanotime()
		}
		per[b] = (nanotime() - t0) / calls
	}
	slices.Sort(per)
	return per[batches/2]
}
