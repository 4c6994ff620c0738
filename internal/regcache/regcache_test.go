package regcache

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// harness drives a Cache[int] whose payloads are ids, tracing releases
// and absorptions as they happen.
type harness struct {
	t        *testing.T
	c        *Cache[int]
	released []int
	trace    []string
}

func newHarness(t *testing.T, cfg Config[int]) *harness {
	h := &harness{t: t}
	cfg.Release = func(e Entry[int]) error {
		h.released = append(h.released, e.Val)
		h.trace = append(h.trace, fmt.Sprint("rel ", e.Val))
		return nil
	}
	cfg.Absorb = func(e Entry[int]) { h.trace = append(h.trace, fmt.Sprint("abs ", e.Val)) }
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

// get looks [lo, hi) of space up: the id covering it, or -1.
func (h *harness) get(space int, lo, hi uintptr) int {
	h.t.Helper()
	e, ok, err := h.c.Get(space, sp(lo, hi), false)
	if err != nil {
		h.t.Fatal(err)
	}
	if !ok {
		return -1
	}
	return e.Val
}

// step runs one step of a script: OP SPACE [LO-HI [ID]], or table, or
// stats, tracing what it sees. OP is ins or ins! (held), get or get! (held), put, queue, drop,
// or flush (the whole space). get traces "hit ID LO-HI" or "miss LO-HI"
// (the span to register), ins the span inserted; table and stats trace
// the table (space:lo-hi=id, in order) and the non-zero counters.
func (h *harness) step(st string) {
	h.t.Helper()
	f := strings.Fields(st)
	num := func(i int) uintptr {
		if i >= len(f) {
			h.t.Fatalf("step %q: too few fields", st)
		}
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			h.t.Fatalf("step %q: %v", st, err)
		}
		return uintptr(n)
	}
	span := func() Span {
		lo, hi, _ := strings.Cut(f[2], "-")
		f = append(f[:2], append([]string{lo, hi}, f[3:]...)...)
		return sp(num(2), num(3))
	}
	switch f[0] {
	case "table":
		h.c.mu.Lock()
		var out []string
		for _, e := range h.c.table {
			out = append(out, fmt.Sprintf("%d:%d-%d=%d", e.Space, e.Start, e.End, e.Val))
		}
		h.c.mu.Unlock()
		h.trace = append(h.trace, "["+strings.Join(out, " ")+"]")
		return
	case "stats":
		s := h.c.Stats()
		var out []string
		for _, c := range []struct {
			name string
			n    int64
		}{{"hits", s.Hits}, {"misses", s.Misses}, {"evictions", s.Evictions}, {"invalidations", s.Invalidations}, {"deferred", s.Deferred}, {"queued", s.Queued}} {
			if c.n != 0 {
				out = append(out, fmt.Sprint(c.name, " ", c.n))
			}
		}
		h.trace = append(h.trace, strings.Join(out, " "))
		return
	}
	space := int(num(1))
	switch f[0] {
	case "ins", "ins!":
		s := span()
		e := h.ins(space, s.Start, s.End, int(num(4)), f[0] == "ins!")
		h.trace = append(h.trace, fmt.Sprintf("ins %d-%d", e.Start, e.End))
	case "get", "get!":
		e, ok, err := h.c.Get(space, span(), f[0] == "get!")
		switch {
		case err != nil:
			h.t.Fatal(err)
		case ok:
			h.trace = append(h.trace, fmt.Sprintf("hit %d %d-%d", e.Val, e.Start, e.End))
		default:
			h.trace = append(h.trace, fmt.Sprintf("miss %d-%d", e.Start, e.End))
		}
	case "put":
		s := span()
		h.c.Put(space, s, int(num(4)))
	case "queue":
		h.c.Queue(space, span())
	case "drop":
		h.c.Drop(space, span())
	case "flush":
		h.c.DropSpace(space)
	default:
		h.t.Fatalf("step %q: unknown", st)
	}
}

// Each script runs on a fresh cache, a step a line: STEP | TRACE, where
// TRACE is what the step and the callbacks it ran said, in order. Close
// must then release what is left in the table.
func TestCache(t *testing.T) {
	cases := []struct {
		name   string
		cfg    Config[int]
		script string
	}{
		{"keep: entries overlap, a lookup finds the last-starting cover", Config[int]{}, `
			ins 0 0-100 1   | ins 0-100
			ins 0 50-200 2  | ins 50-200
			get 0 60-90     | hit 2 50-200
			get 0 10-20     | hit 1 0-100
			get 0 90-150    | hit 2 50-200
			get 0 0-200     | miss 0-200
			get 0 199-200   | hit 2 50-200
			table           | [0:0-100=1 0:50-200=2]
			stats           | hits 4 misses 1`},
		{"drop covered: unused entries a new one covers are released, held ones stay", Config[int]{Overlap: DropCovered}, `
			ins! 0 10-20 1  | ins 10-20
			ins 0 30-40 2   | ins 30-40
			ins 0 90-110 3  | ins 90-110
			ins 0 0-100 4   | rel 2; ins 0-100
			table           | [0:0-100=4 0:10-20=1 0:90-110=3]`},
		{"merge: a miss asks for the union, the insert absorbs what it overlaps", Config[int]{Overlap: Merge}, `
			ins 0 0-10 1    | ins 0-10
			ins 0 20-30 2   | ins 20-30
			ins 0 40-50 3   | ins 40-50
			get 0 5-25      | miss 0-30
			ins 0 0-30 4    | abs 1; abs 2; ins 0-30
			get 0 25-45     | miss 0-50
			table           | [0:0-30=4 0:40-50=3]`},
		{"limit: the least recently used entry no one holds is evicted", Config[int]{Limit: 3}, `
			ins 0 0-10 1    | ins 0-10
			ins! 0 10-20 2  | ins 10-20
			ins 0 20-30 3   | ins 20-30
			get 0 0-5       | hit 1 0-10
			ins 0 30-40 4   | rel 3; ins 30-40
			ins 0 40-50 5   | rel 1; ins 40-50
			table           | [0:10-20=2 0:30-40=4 0:40-50=5]
			stats           | hits 1 evictions 2`},
		{"queued invalidation: applied before the next lookup", Config[int]{}, `
			ins 0 0-10 1    | ins 0-10
			ins 0 10-20 2   | ins 10-20
			ins 0 30-40 3   | ins 30-40
			queue 0 9-11    |
			table           | [0:0-10=1 0:10-20=2 0:30-40=3]
			get 0 12-13     | rel 1; rel 2; miss 12-13
			stats           | misses 1 invalidations 2 queued 1`},
		{"invalidated while held: out of the table at once, released at the last put", Config[int]{Overlap: DropCovered}, `
			ins! 0 0-10 1   | ins 0-10
			get! 0 2-3      | hit 1 0-10
			drop 0 5-6      |
			table           | []
			put 0 0-10 1    |
			put 0 0-10 1    | rel 1
			stats           | hits 1 invalidations 1 deferred 1`},
		{"keep stale (unsafe): an invalidated range keeps its registration", Config[int]{KeepStale: true}, `
			ins 0 0-10 1    | ins 0-10
			queue 0 0-10    |
			drop 0 0-10     |
			flush 0         |
			get 0 0-10      | hit 1 0-10
			stats           | hits 1 queued 1`},
		{"spaces never meet: lookups, overlaps and drops stay in their space", Config[int]{Overlap: DropCovered}, `
			ins 2 0-10 1    | ins 0-10
			ins 1 0-10 2    | ins 0-10
			ins 1 20-30 3   | ins 20-30
			ins 3 0-100 4   | ins 0-100
			get 1 0-5       | hit 2 0-10
			get 2 0-5       | hit 1 0-10
			get 5 0-5       | miss 0-5
			drop 2 0-100    | rel 1
			flush 1         | rel 2; rel 3
			table           | [3:0-100=4]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			for _, line := range strings.Split(strings.TrimSpace(tc.script), "\n") {
				st, want, _ := strings.Cut(line, "|")
				h.trace = h.trace[:0]
				h.step(st)
				if got := strings.Join(h.trace, "; "); got != strings.TrimSpace(want) {
					t.Errorf("%s: got %q, want %q", strings.TrimSpace(st), got, strings.TrimSpace(want))
				}
			}
			n, before := len(h.c.table), len(h.released)
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
	if id := h.get(0, 0, 10); id != 1 {
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
	if id := h.get(0, 0, 10); id != 0 {
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
