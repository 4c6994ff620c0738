package auto

import "testing"

// quickRoute is a quick sweep's intranode decision: sm eager and pipelined
// below 48 KiB, cma from 48 KiB to 1.5 MiB (two ranges, pull then push),
// sm above.
func quickRoute() *Route {
	return &Route{mins: []int{0, 4097, 48 << 10, 768 << 10, 1536 << 10},
		single: []string{"", "", "cma", "cma", ""}, modes: []string{"", "", "", "push", ""}}
}

// The engine asks Rendezvous of every message above the eager limit: its
// cost is on the message rate at the pipelined sizes.
func BenchmarkRouteRendezvous(b *testing.B) {
	r := quickRoute()
	sizes := []int{8 << 10, 8 << 10, 16 << 10, 64 << 10, 2 << 20, 8 << 10, 32 << 10, 1 << 20}
	n := 0
	for i := 0; b.Loop(); i++ {
		if r.Rendezvous(sizes[i&7]) {
			n++
		}
	}
	if n == 0 {
		b.Fatal("no size went by rendezvous")
	}
}

// rangeOf finds the range of every size about each boundary.
func TestRangeOfAtTheBoundaries(t *testing.T) {
	r := quickRoute()
	for i, lo := range r.mins {
		for _, n := range []int{lo - 1, lo, lo + 1} {
			want := i
			if n < lo {
				want = i - 1
			}
			if n < 0 {
				continue
			}
			if got := r.rangeOf(n); got != want {
				t.Errorf("rangeOf(%d) = %d, want %d", n, got, want)
			}
		}
	}
	if got := (&Route{mins: []int{4097}}).rangeOf(4096); got != -1 {
		t.Errorf("below the first range: rangeOf = %d, want -1", got)
	}
}
