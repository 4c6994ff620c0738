package profile

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/gotune/gotune/internal/bytesize"
)

// Agreement counts the decisions two profiles agree on.
type Agreement struct {
	Agree, Total int
	// Differences says what disagrees, one line per decision (or per
	// locality and pair that only one profile has).
	Differences []string
}

// Fraction is Agree / Total; two profiles with nothing to decide agree.
func (a Agreement) Fraction() float64 {
	if a.Total == 0 {
		return 1
	}
	return float64(a.Agree) / float64(a.Total)
}

func (a Agreement) String() string {
	return fmt.Sprintf("agreement: %d of %d decisions (%.1f%%)", a.Agree, a.Total, 100*a.Fraction())
}

// thresholds are the numeric decisions Compare weighs, by key.
var thresholds = []struct {
	key string
	get func(Decision) int
}{
	{"eager_limit", func(d Decision) int { return d.EagerLimit }},
	{"frag_size", func(d Decision) int { return d.FragSize }},
	{"fifo_depth", func(d Decision) int { return d.FIFODepth }},
	{"cell_size", func(d Decision) int { return d.CellSize }},
	{"frag_slots", func(d Decision) int { return d.FragSlots }},
}

// DefaultSizes is the ladder Diff compares routes on: powers of two from
// 1 B to 64 MiB.
func DefaultSizes() []int {
	var s []int
	for n := 1; n <= 64<<20; n *= 2 {
		s = append(s, n)
	}
	return s
}

// Compare counts the decisions of a and b that agree, to tell whether two
// sweeps reached the same profile (say, on 90% of decisions). For every
// locality and memory pair present in either, each size counts one
// decision, agreeing when both route it to the same transport and protocol;
// each threshold (eager limit, fragment size, FIFO depth, cell size,
// fragment slots) counts one and agrees when the two are within one step of
// a power-of-two ladder (ratio at most 2). A pair only one profile has
// disagrees on all of them. The allocator's fields count one each, its
// cache size agreeing within a factor 2. Each stack parameter either
// profile has counts one, agreeing when both have the same value (a stack's
// version is not a decision). Profiles without stacks count as before.
func Compare(a, b *Profile, sizes []int) Agreement {
	var ag Agreement
	count := func(ok bool, format string, args ...any) {
		ag.Total++
		if ok {
			ag.Agree++
		} else {
			ag.Differences = append(ag.Differences, fmt.Sprintf(format, args...))
		}
	}
	for _, loc := range union(slices.Sorted(maps.Keys(a.Decisions)), slices.Sorted(maps.Keys(b.Decisions))) {
		for _, pair := range union(slices.Sorted(maps.Keys(a.Decisions[loc])), slices.Sorted(maps.Keys(b.Decisions[loc]))) {
			key := "decisions." + loc + "." + pair
			da, inA := a.Decisions[loc][pair]
			db, inB := b.Decisions[loc][pair]
			if !inA || !inB {
				n := len(sizes) + len(thresholds)
				ag.Total += n
				which := "a"
				if inB {
					which = "b"
				}
				ag.Differences = append(ag.Differences, fmt.Sprintf("%s: only in %s (%d decisions)", key, which, n))
				continue
			}
			for _, size := range sizes {
				ra, errA := a.Route(loc, pair, size)
				rb, errB := b.Route(loc, pair, size)
				same := errA == nil && errB == nil && ra.Transport == rb.Transport && ra.Protocol == rb.Protocol
				count(same, "%s: size %s: %s vs %s", key, bytesize.Format(size), routeLabel(ra, errA), routeLabel(rb, errB))
			}
			for _, t := range thresholds {
				x, y := t.get(da), t.get(db)
				count(withinTwo(int64(x), int64(y)), "%s.%s: %d vs %d", key, t.key, x, y)
			}
		}
	}
	for _, name := range union(slices.Sorted(maps.Keys(a.Stacks)), slices.Sorted(maps.Keys(b.Stacks))) {
		pa, pb := a.Stacks[name].Params, b.Stacks[name].Params
		for _, param := range union(slices.Sorted(maps.Keys(pa)), slices.Sorted(maps.Keys(pb))) {
			x, inA := pa[param]
			y, inB := pb[param]
			count(inA && inB && x == y, "stacks.%s.params.%s: %s vs %s", name, param, paramLabel(x, inA), paramLabel(y, inB))
		}
	}
	x, y := a.Allocator, b.Allocator
	count(withinTwo(x.CacheBytes, y.CacheBytes), "allocator.cache_bytes: %d vs %d", x.CacheBytes, y.CacheBytes)
	count(x.Purge == y.Purge, "allocator.purge: %s vs %s", x.Purge, y.Purge)
	count(x.THP == y.THP, "allocator.thp: %t vs %t", x.THP, y.THP)
	return ag
}

func paramLabel(v string, ok bool) string {
	if !ok {
		return "(absent)"
	}
	return strconv.Quote(v)
}

func routeLabel(r Range, err error) string {
	if err != nil {
		return "unroutable"
	}
	return r.Transport + " " + r.Protocol
}

// withinTwo reports whether x and y are equal or both positive and at most
// a factor 2 apart.
func withinTwo(x, y int64) bool {
	if x == y {
		return true
	}
	if x <= 0 || y <= 0 {
		return false
	}
	lo, hi := min(x, y), max(x, y)
	return hi-lo <= lo
}

// union merges two sorted lists of keys.
func union(a, b []string) []string {
	u := append(slices.Clone(a), b...)
	slices.Sort(u)
	return slices.Compact(u)
}
