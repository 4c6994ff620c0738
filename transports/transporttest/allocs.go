package transporttest

import (
	"runtime"
	"strings"
)

// modulePrefix names this module's functions in a stack.
const modulePrefix = "github.com/gotune/gotune/"

// OwnAllocations runs f with every heap allocation sampled and returns how
// many of those made while it ran came from this module's code (a stack
// holding one of its functions), with one stack per allocation site for the
// report. The Go runtime allocates on its own at moments no test controls (a
// new thread when a locked goroutine is preempted, a collector worker): those
// stacks hold none of the module's functions and are not counted, which a
// count of runtime.MemStats.Mallocs cannot tell apart.
func OwnAllocations(f func() error) (int64, []string, error) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	before := allocationSites()
	err := f()
	after := allocationSites()
	var n int64
	var sites []string
	for stack, count := range after {
		if d := count - before[stack]; d > 0 {
			n += d
			sites = append(sites, stack)
		}
	}
	return n, sites, err
}

// allocationSites is the number of allocations so far by stack, counting
// only stacks that pass through this module (and not through itself). A
// site shows in runtime.MemProfile only after the collections that follow
// its allocation, hence the collections first.
func allocationSites() map[string]int64 {
	for range 3 {
		runtime.GC()
	}
	var recs []runtime.MemProfileRecord
	for {
		n, ok := runtime.MemProfile(recs, true)
		if ok {
			recs = recs[:n]
			break
		}
		recs = make([]runtime.MemProfileRecord, n+n/4+16)
	}
	sites := make(map[string]int64, len(recs))
	for i := range recs {
		if stack, own := ownStack(recs[i].Stack()); own {
			sites[stack] += recs[i].AllocObjects
		}
	}
	return sites
}

// ownStack renders pcs one frame per line and says whether a function of
// this module is among them (the sampling's own stacks excepted).
func ownStack(pcs []uintptr) (string, bool) {
	var b strings.Builder
	own := false
	frames := runtime.CallersFrames(pcs)
	for {
		fr, more := frames.Next()
		if strings.HasSuffix(fr.Function, "transporttest.allocationSites") {
			return "", false
		}
		own = own || strings.HasPrefix(fr.Function, modulePrefix)
		b.WriteString(fr.Function)
		b.WriteByte('\n')
		if !more {
			break
		}
	}
	return b.String(), own
}
