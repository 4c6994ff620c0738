package bench

import "testing"

// Every alltoall step matches each sender with the receiver that expects
// it, and over the N-1 steps every rank sends to and receives from every
// other once; among a power of two, pairwise, each step is disjoint pairs
// (MPICH's XOR exchange), else and scattered the shift.
func TestAllToAllStepPartners(t *testing.T) {
	for _, c := range []struct {
		ranks, size int
		xor         bool
	}{
		{3, 64 << 10, false}, {4, 64 << 10, true}, {5, 64 << 10, false}, {8, 64 << 10, true},
		{16, 256 << 10, true}, {12, 64 << 10, false}, {4, 8, false}, {16, AllToAllScatter, false},
	} {
		loops := make([]*loop, c.ranks)
		for r := range loops {
			loops[r] = &loop{rank: r, ranks: c.ranks, size: c.size}
		}
		sent := make([]map[int]bool, c.ranks)
		for r := range sent {
			sent[r] = map[int]bool{}
		}
		for k := 1; k < c.ranks; k++ {
			for r, l := range loops {
				to, from := l.stepPartners(k)
				if _, back := loops[to].stepPartners(k); back != r {
					t.Fatalf("%d ranks, %d B, step %d: rank %d sends to %d, which expects rank %d", c.ranks, c.size, k, r, to, back)
				}
				if to == r || from == r || sent[r][to] {
					t.Fatalf("%d ranks, %d B, step %d: rank %d sends to %d (from %d) again or to itself", c.ranks, c.size, k, r, to, from)
				}
				sent[r][to] = true
				if (to == from) != c.xor && c.ranks > 2 && k != c.ranks/2 {
					t.Errorf("%d ranks, %d B, step %d: rank %d to %d from %d, want XOR pairs %v", c.ranks, c.size, k, r, to, from, c.xor)
				}
			}
		}
		for r := range sent {
			if len(sent[r]) != c.ranks-1 {
				t.Errorf("%d ranks: rank %d sent to %d peers", c.ranks, r, len(sent[r]))
			}
		}
	}
}

// Every step of an exchange has its own place in the buffer, as in
// osu_alltoall's, up to allToAllBufferMax; beyond it, and for a settling
// pass larger than the sizes, the places are reused in turn, and a block
// of steps posted together never shares one.
func TestAllToAllPlaces(t *testing.T) {
	for _, c := range []struct {
		ranks, size, largest, peers, settle int
		places                              int
	}{
		{16, 64 << 10, 64 << 10, 0, 0, 15},
		{16, 1 << 10, 64 << 10, 0, 0, 15},
		{64, 1 << 20, 1 << 20, 0, 0, 63},
		{64, 16 << 20, 16 << 20, 0, 0, 4},
		{64, 16 << 20, 16 << 20, 8, 0, 8},
		{16, 4 << 20, 64 << 10, 0, 4 << 20, 1},
		{2, 64 << 10, 64 << 10, 0, 0, 1},
	} {
		bytes := max(allToAllBytes(c.largest, c.ranks, c.peers), c.settle)
		buf := make([]byte, bytes)
		l := &loop{ranks: c.ranks, size: c.size, peers: c.peers}
		l.places = l.allToAllPlacesIn(len(buf))
		seen := map[*byte]int{}
		for k := 1; k < c.ranks; k++ {
			s := l.allToAllSlot([][]byte{buf[:c.size]}, 0, k)
			if len(s) != c.size {
				t.Fatalf("%+v: step %d: %d bytes", c, k, len(s))
			}
			seen[&s[0]]++
		}
		if len(seen) != c.places {
			t.Errorf("%+v: %d places over %d steps (buffer %d B), want %d", c, len(seen), c.ranks-1, bytes, c.places)
		}
	}
}
