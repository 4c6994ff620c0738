package regcache

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// harness drives a Cache[int] whose payloads are ids, recording releases
// and absorptions.
type harness struct {
	t        *testing.T
	c        *Cache[int]
	released []int
	absorbed []int
}

func newHarness(t *testing.T, cfg Config[int]) *harness {
	h := &harness{t: t}
	cfg.Release = func(e Entry[int]) error { h.released = append(h.released, e.Val); return nil }
	cfg.Absorb = func(e Entry[int]) { h.absorbed = append(h.absorbed, e.Val) }
	h.c = New(cfg)
	return h
}

func sp(lo, hi uintptr) Span { return Span{lo, hi} }

// ins registers id over [lo, hi) of space.
func (h *harness) ins(space int, lo, hi uintptr, id int, hold bool) Entry[int] {
	h.t.Helper()
	e, err := h.c.Insert(space, sp(lo, hi), id, hold)
	if err != nil {
		h.t.Fatal(err)
	}
	return e
}

// get looks [lo, hi) of space up: the id covering it, or -1 and the span
// to register.
func (h *harness) get(space int, lo, hi uintptr) (int, Span) {
	h.t.Helper()
	e, ok, err := h.c.Get(space, sp(lo, hi), false)
	if err != nil {
		h.t.Fatal(err)
	}
	if !ok {
		return -1, e.Span
	}
	return e.Val, e.Span
}

// table renders the entries in table order: space:start-end=id.
func (h *harness) table() string {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	var out []string
	for _, e := range h.c.table {
		out = append(out, fmt.Sprintf("%d:%d-%d=%d", e.Space, e.Start, e.End, e.Val))
	}
	return strings.Join(out, " ")
}

func TestCache(t *testing.T) {
	cases := []struct {
		name     string
		cfg      Config[int]
		run      func(h *harness) []string // observations to compare with want
		want     []string
		table    string
		released []int
		absorbed []int
		stats    Stats // the counters compared: all but Entries and Capacity
	}{
		{
			name: "keep: overlapping entries coexist, a covering lookup finds the last-starting cover",
			cfg:  Config[int]{Overlap: Keep},
			run: func(h *harness) []string {
				h.ins(0, 0, 100, 1, false)
				h.ins(0, 50, 200, 2, false)
				var out []string
				for _, s := range []Span{{60, 90}, {10, 20}, {90, 150}, {0, 200}, {0, 100}, {199, 200}} {
					id, got := h.get(0, s.Start, s.End)
					out = append(out, fmt.Sprintf("%d-%d:%d %d-%d", s.Start, s.End, id, got.Start, got.End))
				}
				return out
			},
			want:  []string{"60-90:2 50-200", "10-20:1 0-100", "90-150:2 50-200", "0-200:-1 0-200", "0-100:1 0-100", "199-200:2 50-200"},
			table: "0:0-100=1 0:50-200=2",
			stats: Stats{Hits: 5, Misses: 1},
		},
		{
			name: "drop covered: the unused entries a new one covers are released, held ones stay",
			cfg:  Config[int]{Overlap: DropCovered},
			run: func(h *harness) []string {
				h.ins(0, 10, 20, 1, true)
				h.ins(0, 30, 40, 2, false)
				h.ins(0, 90, 110, 3, false) // overlaps, not covered
				h.ins(0, 0, 100, 4, false)
				return nil
			},
			table:    "0:0-100=4 0:10-20=1 0:90-110=3",
			released: []int{2},
		},
		{
			name: "merge: a miss asks for the union, the insert absorbs what it overlaps",
			cfg:  Config[int]{Overlap: Merge},
			run: func(h *harness) []string {
				h.ins(0, 0, 10, 1, false)
				h.ins(0, 20, 30, 2, false)
				h.ins(0, 40, 50, 3, false)
				id, s := h.get(0, 5, 25)
				e := h.ins(0, s.Start, s.End, 4, false)
				return []string{fmt.Sprintf("miss %d: register %d-%d, got %d-%d", id, s.Start, s.End, e.Start, e.End)}
			},
			want:     []string{"miss -1: register 0-30, got 0-30"},
			table:    "0:0-30=4 0:40-50=3",
			absorbed: []int{1, 2},
			stats:    Stats{Misses: 1},
		},
		{
			name: "limit: the least recently used entry no one holds is evicted",
			cfg:  Config[int]{Limit: 3},
			run: func(h *harness) []string {
				h.ins(0, 0, 10, 1, false)
				h.ins(0, 10, 20, 2, true)
				h.ins(0, 20, 30, 3, false)
				h.get(0, 0, 5)             // 1 used after 3: 3 is the oldest unheld
				h.ins(0, 30, 40, 4, false) // evicts 3
				h.ins(0, 40, 50, 5, false) // evicts 1 (2 is held)
				return nil
			},
			table:    "0:10-20=2 0:30-40=4 0:40-50=5",
			released: []int{3, 1},
			stats:    Stats{Hits: 1, Evictions: 2},
		},
		{
			name: "queued invalidation: gone before the next lookup, released, counted",
			cfg:  Config[int]{},
			run: func(h *harness) []string {
				h.ins(0, 0, 10, 1, false)
				h.ins(0, 10, 20, 2, false)
				h.ins(0, 30, 40, 3, false)
				h.c.Queue(0, sp(9, 11))
				id, _ := h.get(0, 12, 13)
				return []string{fmt.Sprint(id)}
			},
			want:     []string{"-1"},
			table:    "0:30-40=3",
			released: []int{1, 2},
			stats:    Stats{Misses: 1, Invalidations: 2, Queued: 1},
		},
		{
			name: "invalidated while held: out of the table at once, released at the last put",
			cfg:  Config[int]{Overlap: DropCovered},
			run: func(h *harness) []string {
				e := h.ins(0, 0, 10, 1, true)
				if _, ok, _ := h.c.Get(0, sp(2, 3), true); !ok {
					h.t.Fatal("no hit")
				}
				h.c.Drop(0, sp(5, 6))
				out := []string{fmt.Sprint(h.released)}
				h.c.Put(0, e.Span, 1)
				out = append(out, fmt.Sprint(h.released))
				h.c.Put(0, e.Span, 1)
				return out
			},
			want:     []string{"[]", "[]"},
			released: []int{1},
			stats:    Stats{Hits: 1, Invalidations: 1, Deferred: 1},
		},
		{
			name: "keep stale (unsafe): an invalidated range keeps its registration",
			cfg:  Config[int]{KeepStale: true},
			run: func(h *harness) []string {
				h.ins(0, 0, 10, 1, false)
				h.c.Queue(0, sp(0, 10))
				h.c.Drop(0, sp(0, 10))
				h.c.DropSpace(0)
				id, _ := h.get(0, 0, 10)
				return []string{fmt.Sprint(id)}
			},
			want:  []string{"1"},
			table: "0:0-10=1",
			stats: Stats{Hits: 1, Queued: 1},
		},
		{
			name: "spaces never meet: lookups, overlaps and drops stay in their space",
			cfg:  Config[int]{Overlap: DropCovered},
			run: func(h *harness) []string {
				h.ins(2, 0, 10, 1, false)
				h.ins(1, 0, 10, 2, false)
				h.ins(1, 20, 30, 3, false)
				h.ins(3, 0, 100, 4, false) // covers nothing of spaces 1 and 2
				a, _ := h.get(1, 0, 5)
				b, _ := h.get(2, 0, 5)
				c, _ := h.get(5, 0, 5)
				h.c.Drop(2, sp(0, 100))
				h.c.DropSpace(1)
				return []string{fmt.Sprint(a, b, c)}
			},
			want:     []string{"2 1 -1"},
			table:    "3:0-100=4",
			released: []int{1, 2, 3},
			stats:    Stats{Hits: 2, Misses: 1, Invalidations: 3},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			got := tc.run(h)
			if !slices.Equal(got, tc.want) {
				t.Errorf("observed %q, want %q", got, tc.want)
			}
			if tb := h.table(); tb != tc.table {
				t.Errorf("table %q, want %q", tb, tc.table)
			}
			if !slices.Equal(h.released, tc.released) || !slices.Equal(h.absorbed, tc.absorbed) {
				t.Errorf("released %v, absorbed %v; want %v, %v", h.released, h.absorbed, tc.released, tc.absorbed)
			}
			st := h.c.Stats()
			st.Entries, st.Capacity = 0, 0
			if st != tc.stats {
				t.Errorf("stats %+v, want %+v", st, tc.stats)
			}
			n := len(h.c.table)
			before := len(h.released)
			if err := h.c.Close(); err != nil {
				t.Fatal(err)
			}
			if len(h.released) != before+n {
				t.Errorf("Close released %d entries, want the %d in the table", len(h.released)-before, n)
			}
		})
	}
}

func TestAlign(t *testing.T) {
	cases := []struct {
		addr  uintptr
		n     int
		align uintptr
		want  Span
	}{
		{0x1005, 100, 0x1000, Span{0x1000, 0x2000}},
		{0x1000, 0x1000, 0x1000, Span{0x1000, 0x2000}},
		{0x1fff, 2, 0x1000, Span{0x1000, 0x3000}},
		{0x12345, 1, 0x10000, Span{0x10000, 0x20000}},
	}
	for _, c := range cases {
		if got := Align(c.addr, c.n, c.align); got != c.want {
			t.Errorf("Align(%#x, %d, %#x) = %#x-%#x, want %#x-%#x", c.addr, c.n, c.align, got.Start, got.End, c.want.Start, c.want.End)
		}
	}
}

// arena is a TableMemory that hands out Go-heap buffers (fine for a
// pointer-free payload) and counts its calls.
type arena struct {
	allocs, frees int
	live          map[*byte]bool
	failFree      bool
}

func (a *arena) Alloc(n int) ([]byte, error) {
	a.allocs++
	b := make([]byte, n)
	a.live[&b[0]] = true
	return b, nil
}

func (a *arena) Free(b []byte) error {
	a.frees++
	if !a.live[&b[0]] {
		return errors.New("not allocated here")
	}
	delete(a.live, &b[0])
	if a.failFree {
		return errors.New("refused")
	}
	return nil
}

// A table in caller memory grows through the table function (called with
// the cache lock held), keeps its entries across growths, and is freed at
// Close.
func TestUseTable(t *testing.T) {
	a := &arena{live: map[*byte]bool{}}
	h := newHarness(t, Config[int]{})
	h.ins(0, 0, 10, 1, false) // before the move: carried over
	var locked []bool
	err := h.c.UseTable(func(old []byte, n int) ([]byte, error) {
		held := !h.c.mu.TryLock()
		if !held {
			h.c.mu.Unlock()
		}
		locked = append(locked, held)
		return Move(a, old, n)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 3*InitialEntries; i++ {
		h.ins(0, uintptr(10*i), uintptr(10*i+10), i+1, false)
	}
	if id, _ := h.get(0, 0, 10); id != 1 {
		t.Errorf("the first entry is lost across the moves: got %d", id)
	}
	st := h.c.Stats()
	if st.Grows != 2 || st.Capacity != 4*InitialEntries || st.Entries != 3*InitialEntries {
		t.Errorf("stats %+v: want 2 growths to %d entries", st, 4*InitialEntries)
	}
	if err := h.c.Close(); err != nil {
		t.Fatal(err)
	}
	if a.allocs != 3 || a.frees != 3 || len(a.live) != 0 {
		t.Errorf("%d allocs, %d frees, %d live: want the first table, two growths, all freed", a.allocs, a.frees, len(a.live))
	}
	if want := []bool{false, true, true, false}; !slices.Equal(locked, want) {
		t.Errorf("cache lock held at the table calls: %v, want %v (move, 2 growths, close)", locked, want)
	}
	if len(h.released) != 3*InitialEntries {
		t.Errorf("Close released %d entries", len(h.released))
	}
}

// A growth that cannot free the old table keeps the new one and reports
// it; the entry that was being inserted is released.
func TestUseTableFreeRefused(t *testing.T) {
	a := &arena{live: map[*byte]bool{}}
	h := newHarness(t, Config[int]{})
	if err := h.c.UseTable(func(old []byte, n int) ([]byte, error) { return Move(a, old, n) }); err != nil {
		t.Fatal(err)
	}
	for i := range InitialEntries {
		h.ins(0, uintptr(10*i), uintptr(10*i+10), i, false)
	}
	a.failFree = true
	_, err := h.c.Insert(0, sp(1000, 1010), 99, false)
	if err == nil || !strings.Contains(err.Error(), "refused") || !slices.Equal(h.released, []int{99}) {
		t.Errorf("got %v, released %v: want the refusal, 99 released", err, h.released)
	}
	if id, _ := h.get(0, 0, 10); id != 0 {
		t.Errorf("entries lost: got %d", id)
	}
}

func TestClosed(t *testing.T) {
	h := newHarness(t, Config[int]{})
	e := h.ins(0, 0, 10, 1, true)
	if err := h.c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, _, err := h.c.Get(0, sp(0, 10), false); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if _, err := h.c.Insert(0, sp(0, 10), 2, false); !errors.Is(err, ErrClosed) {
		t.Errorf("Insert after Close: %v", err)
	}
	if _, ok := h.c.Find(0, sp(0, 10)); ok {
		t.Error("Find after Close hit")
	}
	h.c.Put(0, e.Span, 1) // a hold outliving Close: nothing left to do
	if !slices.Equal(h.released, []int{1, 2}) {
		t.Errorf("released %v: want the entry at Close and the refused insert", h.released)
	}
}
