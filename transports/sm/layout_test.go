package sm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

// ringPair is one channel's producer and consumer over private memory.
func ringPair(t *testing.T, p Params) (*producer, *consumer) {
	t.Helper()
	seg, err := sys.MapAnon(p.SegmentBytes(2), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Unmap(seg) })
	c, err := openChannel(seg, 0, 1, 2, p)
	if err != nil {
		t.Fatal(err)
	}
	return &producer{channel: c, ring: &fragRing{}}, &consumer{channel: c}
}

// placed is a fragment a test hands to the producer: its length and the
// ring offset it must land at (noRoom: the producer must refuse it).
type placed struct {
	n   int
	off uint64
}

const noRoom = ^uint64(0)

// packed is count fragments of n bytes from offset 0, then last.
func packed(n, count int, last placed) []placed {
	fs := make([]placed, 0, count+1)
	for i := range count {
		fs = append(fs, placed{n, uint64(i * n)})
	}
	return append(fs, last)
}

// The fragment ring is counted in bytes: fragments smaller than FragSize
// pack densely, one that would cross the end starts over at offset 0, and
// the consumer finds every fragment where the producer put it through its
// descriptor cell.
func TestFragmentRingPlacement(t *testing.T) {
	for _, tc := range []struct {
		name        string
		size, slots int
		frags       []placed
		release     int // fragments the consumer takes before the last one is offered
		wrap        int // Params.Wrap (0: the whole ring)
	}{
		{"8K fragments fill a 256K ring 32 times", 64 << 10, 4, packed(8<<10, 32, placed{8 << 10, noRoom}), 0, 0},
		{"a released fragment makes room", 64 << 10, 4, packed(8<<10, 32, placed{8 << 10, 0}), 1, 0},
		{"lengths round up to a cache line", 256, 1, []placed{{1, 0}, {65, 64}, {64, 192}, {1, noRoom}}, 0, 0},
		{"a fragment that would cross the end wraps to the start", 192, 2, []placed{{192, 0}, {100, 192}, {128, 0}}, 1, 0},
		{"a wrap waits for the start to be released", 192, 2, []placed{{192, 0}, {100, 192}, {128, noRoom}}, 0, 0},
		{"a wrap needs its whole length free at the start", 192, 2, []placed{{64, 0}, {192, 64}, {150, noRoom}}, 1, 0},
		{"a wrap fits once the ring is drained", 192, 2, []placed{{64, 0}, {192, 64}, {150, 0}}, 2, 0},
		{"an empty ring takes a wrapping fragment", 192, 1, []placed{{128, 0}, {128, 0}}, 1, 0},
		{"full-size fragments wrap at sm.wrap", 128, 4, []placed{{128, 0}, {128, 128}, {128, 0}}, 1, 256},
		{"the rest of the ring counts as used until passed", 128, 4, []placed{{128, 0}, {128, 128}, {128, noRoom}}, 0, 256},
		{"shorter fragments go past sm.wrap", 128, 4, []placed{{128, 0}, {128, 128}, {64, 256}, {64, 320}, {128, 0}}, 1, 256},
		{"a full-size fragment after short ones past sm.wrap waits", 128, 4, []placed{{64, 0}, {128, 64}, {64, 192}, {64, 256}, {128, noRoom}}, 0, 256},
		{"fragments of WrapFrom bytes wrap at sm.wrap when full-size ones are larger", 2 * WrapFrom, 4,
			[]placed{{WrapFrom, 0}, {WrapFrom, WrapFrom}, {WrapFrom, 2 * WrapFrom}, {WrapFrom, 3 * WrapFrom}, {WrapFrom, 0}}, 1, 4 * WrapFrom},
		{"shorter ones still go past it", 2 * WrapFrom, 4,
			[]placed{{WrapFrom, 0}, {WrapFrom, WrapFrom}, {WrapFrom, 2 * WrapFrom}, {WrapFrom - 64, 3 * WrapFrom}, {WrapFrom - 64, 4*WrapFrom - 64}}, 0, 4 * WrapFrom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Params{Depth: 64, CellSize: 128, EagerLimit: 64, FragSize: tc.size, FragSlots: tc.slots, Wrap: tc.wrap, Copy: "go"}
			prod, cons := ringPair(t, p)
			taken := 0
			for i, f := range tc.frags {
				if i == len(tc.frags)-1 {
					for ; taken < tc.release; taken++ {
						h := cons.peek()
						if h == nil {
							t.Fatalf("fragment %d: no descriptor cell", taken)
						}
						if got := cons.curFrag(int(h.length)); len(got) != tc.frags[taken].n || got[0] != byte(taken+1) {
							t.Fatalf("consumer found %d bytes marked %d, want fragment %d (%d bytes)", len(got), got[0], taken+1, tc.frags[taken].n)
						}
						cons.releaseFrag()
						cons.release()
					}
				}
				b := prod.nextFrag(f.n)
				switch {
				case f.off == noRoom && b != nil:
					t.Fatalf("fragment %d (%d bytes) placed, want no room", i, f.n)
				case f.off == noRoom:
					continue
				case b == nil:
					t.Fatalf("fragment %d (%d bytes): no room, want offset %d", i, f.n, f.off)
				}
				if off := uint64(sys.AddressOf(b) - sys.AddressOf(prod.frags)); off != f.off || len(b) != f.n {
					t.Fatalf("fragment %d: %d bytes at offset %d, want %d at %d", i, len(b), off, f.n, f.off)
				}
				b[0] = byte(i + 1)
				prod.publishFrag(kindFrag, f.n, 0, 0)
			}
		})
	}
}

// One rank's fragment ring serves all its peers: each consumer finds its
// own fragments, and space comes back in the order it was placed, so a
// peer that holds its fragment holds the ring behind it until it lets go.
func TestFragmentRingSharedByPeers(t *testing.T) {
	p := Params{Depth: 8, CellSize: 128, EagerLimit: 64, FragSize: 256, FragSlots: 2, Copy: "go"}
	const n = 3
	seg, err := sys.MapAnon(p.SegmentBytes(n), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Unmap(seg) })
	ring := &fragRing{}
	prods, conss := make([]*producer, n), make([]*consumer, n)
	for dst := 1; dst < n; dst++ {
		c, err := openChannel(seg, 0, dst, n, p)
		if err != nil {
			t.Fatal(err)
		}
		prods[dst], conss[dst] = &producer{channel: c, ring: ring}, &consumer{channel: c}
	}
	send := func(dst int, mark byte) bool {
		b := prods[dst].nextFrag(256)
		if b == nil {
			return false
		}
		b[0] = mark
		prods[dst].publishFrag(kindFrag, 256, 0, 0)
		return true
	}
	take := func(dst int, mark byte) {
		t.Helper()
		c := conss[dst]
		h := c.peek()
		if h == nil {
			t.Fatalf("rank %d: no descriptor cell", dst)
		}
		if got := c.curFrag(int(h.length)); got[0] != mark {
			t.Fatalf("rank %d found fragment %d, want %d", dst, got[0], mark)
		}
		c.releaseFrag()
		c.release()
	}
	if !send(1, 1) || !send(2, 2) {
		t.Fatal("two fragments do not fit a ring of two")
	}
	if send(2, 3) {
		t.Fatal("a third fragment fit a full ring")
	}
	take(2, 2)
	if send(2, 3) {
		t.Fatal("rank 2's release freed the ring ahead of rank 1's fragment")
	}
	take(1, 1)
	if !send(2, 3) || !send(1, 4) {
		t.Fatal("the ring stayed full after both released")
	}
	take(1, 4)
	take(2, 3)
	if p.SegmentBytes(n) != n*p.RingBytes()+n*(n-1)*p.PairBytes() {
		t.Fatalf("segment of %d bytes", p.SegmentBytes(n))
	}
}

// TestCellDefaults: the built-in cell fits the eager limit with CellSlack
// to spare, and an explicit cell without an eager limit caps the limit.
func TestCellDefaults(t *testing.T) {
	cases := []struct {
		opts            transports.Options
		wantCell, eager int
	}{
		{nil, 4096 + 64 + CellSlack, 4096},
		{transports.Options{"sm.eager": "2K"}, 2048 + 64 + CellSlack, 2048},
		{transports.Options{"sm.eager": "1000"}, 1024 + CellSlack, 1000},
		{transports.Options{"sm.cell": "1088"}, 1088, 1072},
		{transports.Options{"sm.eager": "1K", "sm.cell": "1088"}, 1088, 1024},
	}
	for _, c := range cases {
		p, err := ParseParams(c.opts)
		if err != nil {
			t.Fatalf("%v: %v", c.opts, err)
		}
		if p.CellSize != c.wantCell || p.EagerLimit != c.eager {
			t.Errorf("%v: cell %d, eager %d; want cell %d, eager %d", c.opts, p.CellSize, p.EagerLimit, c.wantCell, c.eager)
		}
	}
}

// A job whose channels exceed sm.budget (or the built-in share of the
// node's memory) fails to start, and the error says what it needs and
// what to change.
func TestBudget(t *testing.T) {
	p := DefaultParams()
	need := func(n int) int64 { return int64(p.SegmentBytes(n)) }
	for _, tc := range []struct {
		name   string
		budget int
		ranks  int
		mem    int64
		fails  bool
	}{
		{"2 ranks within the built-in share", 0, 2, 24 << 30, false},
		{"128 ranks over 1/32 of 24 GiB", 0, 128, 24 << 30, true},
		{"64 ranks within 1/32 of 512 GiB", 0, 64, 512 << 30, false},
		{"an explicit budget is the ceiling", int(need(8)), 8, 1 << 40, false},
		{"a byte less fails", int(need(8)) - 1, 8, 1 << 40, true},
		{"memory unknown: no built-in ceiling", 0, 64, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := p
			q.Budget = tc.budget
			err := q.CheckBudget(tc.ranks, tc.mem)
			if (err != nil) != tc.fails {
				t.Fatalf("CheckBudget = %v, want failure %v", err, tc.fails)
			}
			if err != nil {
				for _, s := range []string{"sm.budget", "sm.depth", "sm.frags", fmt.Sprintf("%d ranks", tc.ranks)} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("%q does not name %s", err, s)
					}
				}
			}
		})
	}
}

// The job's launcher sizes the segment through SharedBytes, which applies
// sm.budget, so a job over it fails before any rank starts.
func TestSharedBytesAppliesTheBudget(t *testing.T) {
	if _, err := SharedBytes(8, transports.Options{KeyBudget: "1M"}); err == nil || !strings.Contains(err.Error(), "sm.budget=1 MiB") {
		t.Fatalf("SharedBytes of 8 ranks within 1 MiB: %v, want an error naming sm.budget", err)
	}
	p := DefaultParams()
	got, err := SharedBytes(8, transports.Options{KeyBudget: fmt.Sprint(p.SegmentBytes(8))})
	if err != nil || got != p.SegmentBytes(8) {
		t.Fatalf("SharedBytes within its budget = %d, %v; want %d", got, err, p.SegmentBytes(8))
	}
}

// The built-in depth follows the job's rank count; a depth the job sets
// (an option or a profile's channel) does not.
func TestDepthFollowsTheRankCountUnlessSet(t *testing.T) {
	for _, tc := range []struct{ ranks, want int }{{2, 64}, {9, 64}, {10, 32}, {18, 32}, {19, 16}, {32, 16}, {64, 16}, {192, 16}} {
		if got := DefaultParams().ForRanks(tc.ranks).Depth; got != tc.want {
			t.Errorf("%d ranks: depth %d, want %d", tc.ranks, got, tc.want)
		}
		if got := DepthFor(tc.ranks); got != tc.want {
			t.Errorf("DepthFor(%d) = %d, want %d", tc.ranks, got, tc.want)
		}
	}
	set, err := ParseParams(transports.Options{KeyDepth: "64"})
	if err != nil {
		t.Fatal(err)
	}
	if got := set.ForRanks(32).Depth; got != 64 {
		t.Errorf("sm.depth=64 at 32 ranks: depth %d", got)
	}
	ch, err := ChannelParams(Channel{Depth: 128, CellSize: CellFor(4096), EagerLimit: 4096, FragSize: 64 << 10, FragSlots: 64})
	if err != nil {
		t.Fatal(err)
	}
	if got := ch.ForRanks(32).Depth; got != 128 {
		t.Errorf("a profile's depth 128 at 32 ranks: depth %d", got)
	}
	// A profile's depth decided for 32 ranks per node: a smaller job takes
	// the built-in depth where that is deeper, never less than the profile's.
	for _, tc := range []struct{ depth, ranks, want int }{
		{16, 32, 16}, {16, 64, 16}, {16, 2, 64}, {16, 12, 32}, {128, 2, 128}, {8, 31, 16},
	} {
		ch, err := ChannelParams(Channel{Depth: tc.depth, DepthRanks: 32, CellSize: CellFor(4096), EagerLimit: 4096, FragSize: 64 << 10, FragSlots: 64})
		if err != nil {
			t.Fatal(err)
		}
		if got := ch.ForRanks(tc.ranks).Depth; got != tc.want {
			t.Errorf("a profile's depth %d for 32 ranks, at %d ranks: depth %d, want %d", tc.depth, tc.ranks, got, tc.want)
		}
	}
	for _, tc := range []struct{ frag, slots, ranks, want int }{
		{64 << 10, 32, 2, 64}, {64 << 10, 32, 31, 64}, {64 << 10, 32, 32, 32}, {64 << 10, 32, 64, 32},
		{128 << 10, 16, 2, 32}, {64 << 10, 128, 2, 128}, {16 << 10, 64, 2, 256},
	} {
		ch, err := ChannelParams(Channel{Depth: 16, DepthRanks: 32, CellSize: CellFor(4096), EagerLimit: 4096, FragSize: tc.frag, FragSlots: tc.slots})
		if err != nil {
			t.Fatal(err)
		}
		if got := ch.ForRanks(tc.ranks).FragSlots; got != tc.want {
			t.Errorf("a profile's ring of %d x %d for 32 ranks, at %d ranks: %d fragments, want %d", tc.slots, tc.frag, tc.ranks, got, tc.want)
		}
	}
	def := DefaultParams()
	if got, want := def.SegmentBytes(32), 32*def.RingBytes()+32*31*def.ForRanks(32).PairBytes(); got != want {
		t.Errorf("32 ranks' segment: %d bytes, want %d", got, want)
	}
}

// A receive's polls touch the further lines of a small message only, and
// never past its cell.
func TestTouchLines(t *testing.T) {
	for _, tc := range []struct{ n, cell, want int }{
		{0, 4672, 0}, {8, 4672, 0}, {48, 4672, 0}, {49, 4672, 1}, {112, 4672, 1},
		{113, 4672, 2}, {176, 4672, 2}, {177, 4672, 0}, {1024, 4672, 0},
		{4096, 128, 1}, // a 128-byte cell: its second line, whatever the buffer
		{4096, 64, 0},
	} {
		if got := touchLines(tc.n, tc.cell); got != tc.want {
			t.Errorf("touchLines(%d, %d) = %d, want %d", tc.n, tc.cell, got, tc.want)
		}
	}
}
