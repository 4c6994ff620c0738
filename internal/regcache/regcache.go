package regcache

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"
)

// InitialEntries is a new table's capacity; more live entries double it.
const InitialEntries = 8

// ErrClosed is what a closed cache answers to Get and Insert.
var ErrClosed = errors.New("registration cache closed")

// Span is the address range [Start, End).
type Span struct{ Start, End uintptr }

// Align is [addr, addr+n) rounded out to multiples of align, a power of two.
func Align(addr uintptr, n int, align uintptr) Span {
	return Span{addr &^ (align - 1), (addr + uintptr(n) + align - 1) &^ (align - 1)}
}

// Len is the span's length in bytes.
func (s Span) Len() int { return int(s.End - s.Start) }

// Overlaps reports whether s and o share a byte.
func (s Span) Overlaps(o Span) bool { return s.Start < o.End && o.Start < s.End }

// Covers reports whether o lies within s.
func (s Span) Covers(o Span) bool { return s.Start <= o.Start && o.End <= s.End }

// Entry is one cached registration. It holds no Go pointers of its own, so
// a table of entries whose payload has none may live outside the Go heap.
type Entry[V comparable] struct {
	Span
	Space int    // the address space (a peer); entries of two spaces never meet
	used  uint64 // the cache's clock at the entry's last use
	refs  int32  // holds taken by Get or Insert, not yet given back by Put
	Val   V      // the caller's payload: its handle on the registration
}

// Overlap says what Insert does to the entries that a new one overlaps.
type Overlap int

const (
	// Keep leaves them: entries may overlap.
	Keep Overlap = iota
	// DropCovered drops (releases) those the new entry covers that no one
	// holds.
	DropCovered
	// Merge widens the new entry to the union of those it overlaps and
	// absorbs them (Config.Absorb): entries never overlap. Its entries are
	// not held.
	Merge
)

// Config is what a Cache does beyond looking up and inserting.
type Config[V comparable] struct {
	Overlap Overlap
	// Limit > 0 keeps at most Limit entries: Insert first evicts the least
	// recently used one that no one holds.
	Limit int
	// Release deregisters an entry the cache drops: evicted, invalidated
	// (when held, at the last Put), covered, at Close, or the one Insert
	// could not keep. It runs without the cache lock; Close returns its
	// errors.
	Release func(Entry[V]) error
	// Absorb, under Merge, is told of an entry absorbed into a new one: its
	// range stays registered as part of the new entry's. No lock is held.
	Absorb func(Entry[V])
	// KeepStale is the DELIBERATELY UNSAFE form (hazard H1's stale twin):
	// invalidations are ignored, so a range whose memory was released and
	// reused keeps its old registration. For the probes that must catch it.
	KeepStale bool
}

// TableFunc moves a table into memory its caller owns: it returns n bytes
// holding a copy of old, and frees old; n 0 only frees old.
type TableFunc func(old []byte, n int) ([]byte, error)

// TableMemory is an allocator a table can live in.
type TableMemory interface {
	Alloc(n int) ([]byte, error)
	Free(b []byte) error
}

// Move is the TableFunc of allocator a.
func Move(a TableMemory, old []byte, n int) ([]byte, error) {
	var mem []byte
	if n > 0 {
		var err error
		if mem, err = a.Alloc(n); err != nil {
			return nil, err
		}
		copy(mem, old)
	}
	if old != nil {
		if err := a.Free(old); err != nil {
			return mem, fmt.Errorf("free the old table: %w", err)
		}
	}
	return mem, nil
}

// Stats count what a cache did.
type Stats struct {
	Hits, Misses  int64
	Evictions     int64 // least recently used entries dropped for room
	Invalidations int64 // entries dropped because their memory was released
	Deferred      int64 // invalidated while held: released at the last Put
	Queued        int64 // invalidations that went through the queue
	Grows         int64 // table growths
	Entries       int   // entries now
	Capacity      int   // table capacity now
}

// Cache maps address ranges to registrations. Its methods are safe from
// any goroutine.
type Cache[V comparable] struct {
	cfg Config[V]

	mu       sync.Mutex // the cache lock
	table    []Entry[V] // sorted by (Space, Start); cap is the capacity
	tableMem []byte     // UseTable: the memory behind table
	grow     TableFunc  // UseTable: how the table moves
	retired  []Entry[V] // invalidated while held
	maxLen   uintptr    // the longest entry ever: bounds every search
	clock    uint64
	closed   bool
	st       Stats

	qmu   sync.Mutex // guards queue only
	queue []queued
}

type queued struct {
	space int
	s     Span
}

// New returns an empty cache, its table on the Go heap.
func New[V comparable](cfg Config[V]) *Cache[V] {
	c := &Cache[V]{cfg: cfg, table: make([]Entry[V], 0, InitialEntries)}
	c.st.Capacity = InitialEntries
	return c
}

func entrySize[V comparable]() int { return int(unsafe.Sizeof(Entry[V]{})) }

// entriesIn views mem as a table of n entries.
func entriesIn[V comparable](mem []byte, n int) []Entry[V] {
	return unsafe.Slice((*Entry[V])(unsafe.Pointer(unsafe.SliceData(mem))), n)
}

// UseTable moves the table into memory from table, which the cache calls
// again, holding its lock, each time the table grows: hazard H1's unsafe
// shape when table allocates from an allocator whose release hook takes
// the cache lock. V must hold no Go pointers.
func (c *Cache[V]) UseTable(table TableFunc) error {
	c.mu.Lock()
	n := max(cap(c.table), InitialEntries)
	c.mu.Unlock()
	mem, err := table(nil, n*entrySize[V]())
	if err != nil {
		return fmt.Errorf("registration table: %w", err)
	}
	c.mu.Lock()
	if c.grow != nil || c.closed || len(c.table) > n {
		c.mu.Unlock()
		_, err := table(mem, 0)
		return errors.Join(errors.New("registration table: moved already, closed, or grown meanwhile"), err)
	}
	c.table = append(entriesIn[V](mem, n)[:0], c.table...)
	c.tableMem, c.grow = mem, table
	c.st.Capacity = n
	c.mu.Unlock()
	return nil
}

// Get returns the entry of space covering s, taking a hold on it when
// hold (give it back with Put), after applying queued invalidations. On a
// miss the entry returned is the one to register: its Span is s, or under
// Merge the union of s and the entries it overlaps.
func (c *Cache[V]) Get(space int, s Span, hold bool) (Entry[V], bool, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return Entry[V]{}, false, ErrClosed
	}
	dead := c.drainLocked()
	e, ok := Entry[V]{Span: s, Space: space}, false
	if i, hit := c.coverLocked(space, s); hit {
		c.clock++
		c.table[i].used = c.clock
		if hold {
			c.table[i].refs++
		}
		c.st.Hits++
		e, ok = c.table[i], true
	} else {
		c.st.Misses++
		if c.cfg.Overlap == Merge {
			lo, hi := c.overlapLocked(space, s)
			for _, o := range c.table[lo:hi] {
				if o.Overlaps(s) {
					e.Start, e.End = min(e.Start, o.Start), max(e.End, o.End)
				}
			}
		}
	}
	c.mu.Unlock()
	c.release(dead)
	return e, ok, nil
}

// Find is Get without counting, touching or holding, on an open or closed
// cache.
func (c *Cache[V]) Find(space int, s Span) (Entry[V], bool) {
	c.mu.Lock()
	dead := c.drainLocked()
	var e Entry[V]
	i, ok := c.coverLocked(space, s)
	if ok {
		e = c.table[i]
	}
	c.mu.Unlock()
	c.release(dead)
	return e, ok
}

// Insert adds the registration v of s in space, held once when hold, and
// returns its entry (under Merge, widened over those it absorbed). On an
// error v has been released.
func (c *Cache[V]) Insert(space int, s Span, v V, hold bool) (Entry[V], error) {
	e := Entry[V]{Span: s, Space: space, Val: v}
	if hold {
		e.refs = 1
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.release([]Entry[V]{e})
		return Entry[V]{}, ErrClosed
	}
	dead := c.drainLocked()
	var absorbed []Entry[V]
	switch c.cfg.Overlap {
	case Merge:
		lo, hi := c.overlapLocked(space, s)
		absorbed = c.removeLocked(lo, hi, func(o *Entry[V]) bool { return o.Overlaps(s) })
		for _, o := range absorbed {
			e.Start, e.End = min(e.Start, o.Start), max(e.End, o.End)
		}
	case DropCovered:
		lo, hi := c.startsIn(space, s.Start, s.End)
		dead = append(dead, c.removeLocked(lo, hi, func(o *Entry[V]) bool { return o.refs == 0 && s.Covers(o.Span) })...)
	}
	if c.cfg.Limit > 0 && len(c.table) >= c.cfg.Limit {
		if i := c.lruLocked(); i >= 0 {
			dead = append(dead, c.table[i])
			c.table = slices.Delete(c.table, i, i+1)
			c.st.Evictions++
		}
	}
	var err error
	if len(c.table) == cap(c.table) {
		err = c.growLocked()
	}
	if err == nil {
		c.clock++
		e.used = c.clock
		i := c.startIndex(space, e.Start+1) // after those starting there too
		c.table = slices.Insert(c.table, i, e)
		c.maxLen = max(c.maxLen, e.End-e.Start)
	} else {
		dead = append(dead, e)
	}
	c.st.Entries = len(c.table)
	c.mu.Unlock()
	if c.cfg.Absorb != nil {
		for _, o := range absorbed {
			c.cfg.Absorb(o)
		}
	}
	c.release(dead)
	if err != nil {
		return Entry[V]{}, err
	}
	return e, nil
}

// Put gives back a hold on the entry of space at s with payload v. The
// last hold on an entry invalidated meanwhile releases it.
func (c *Cache[V]) Put(space int, s Span, v V) {
	match := func(e Entry[V]) bool { return e.Space == space && e.Span == s && e.Val == v }
	c.mu.Lock()
	var dead []Entry[V]
	lo, hi := c.startsIn(space, s.Start, s.Start+1)
	if i := slices.IndexFunc(c.table[lo:hi], match); i >= 0 {
		c.table[lo+i].refs--
	} else if i := slices.IndexFunc(c.retired, match); i >= 0 {
		if c.retired[i].refs--; c.retired[i].refs == 0 {
			dead = append(dead, c.retired[i])
			c.retired = slices.Delete(c.retired, i, i+1)
		}
	}
	c.mu.Unlock()
	c.release(dead)
}

// Queue invalidates s in space before the next lookup. It takes only the
// queue's lock, so an allocator's release hook may call it on any
// goroutine, the one holding the cache lock included.
func (c *Cache[V]) Queue(space int, s Span) {
	c.qmu.Lock()
	c.queue = append(c.queue, queued{space, s})
	c.qmu.Unlock()
}

// Drop invalidates the entries of space overlapping any of spans now,
// taking the cache lock.
func (c *Cache[V]) Drop(space int, spans ...Span) {
	c.mu.Lock()
	var dead []Entry[V]
	for _, s := range spans {
		dead = append(dead, c.dropLocked(space, s, false)...)
	}
	c.mu.Unlock()
	c.release(dead)
}

// DropSpace invalidates every entry of space now.
func (c *Cache[V]) DropSpace(space int) {
	c.mu.Lock()
	dead := c.dropLocked(space, Span{}, true)
	c.mu.Unlock()
	c.release(dead)
}

// Locked runs f holding the cache lock: for an unsafe form whose hook must
// share it.
func (c *Cache[V]) Locked(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}

// SetKeepStale switches Config.KeepStale.
func (c *Cache[V]) SetKeepStale(on bool) {
	c.mu.Lock()
	c.cfg.KeepStale = on
	c.mu.Unlock()
}

// Stats returns a snapshot of the counters, after applying queued
// invalidations.
func (c *Cache[V]) Stats() Stats {
	c.mu.Lock()
	dead := c.drainLocked()
	st := c.st
	c.mu.Unlock()
	c.release(dead)
	return st
}

// Close releases every entry (held ones too; those invalidated while held
// go at their last Put) and frees UseTable's memory. Closing again does
// nothing.
func (c *Cache[V]) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	dead := append(c.drainLocked(), c.table...) // copies: the table's memory goes next
	mem, grow := c.tableMem, c.grow
	c.table, c.tableMem = nil, nil
	c.st.Entries = 0
	c.mu.Unlock()
	err := c.release(dead)
	if mem != nil { // without the cache lock
		if _, ferr := grow(mem, 0); ferr != nil {
			err = errors.Join(err, fmt.Errorf("free the registration table: %w", ferr))
		}
	}
	return err
}

// release runs Config.Release on each of dead; the cache lock is not held.
func (c *Cache[V]) release(dead []Entry[V]) error {
	var errs []error
	for _, e := range dead {
		if c.cfg.Release != nil {
			errs = append(errs, c.cfg.Release(e))
		}
	}
	return errors.Join(errs...)
}

// drainLocked applies the queued invalidations and returns the entries to
// release.
func (c *Cache[V]) drainLocked() []Entry[V] {
	c.qmu.Lock()
	q := c.queue
	c.queue = nil
	c.qmu.Unlock()
	c.st.Queued += int64(len(q))
	var dead []Entry[V]
	for _, x := range q {
		dead = append(dead, c.dropLocked(x.space, x.s, false)...)
	}
	return dead
}

// dropLocked removes the entries of space overlapping s (all of them when
// all), and returns those to release now; held ones are retired.
func (c *Cache[V]) dropLocked(space int, s Span, all bool) []Entry[V] {
	if c.cfg.KeepStale {
		return nil
	}
	lo, hi := c.startIndex(space, 0), c.startIndex(space+1, 0)
	if !all {
		lo, hi = c.overlapLocked(space, s)
	}
	var dead []Entry[V]
	for _, e := range c.removeLocked(lo, hi, func(e *Entry[V]) bool { return all || e.Overlaps(s) }) {
		c.st.Invalidations++
		if e.refs > 0 {
			c.st.Deferred++
			c.retired = append(c.retired, e)
		} else {
			dead = append(dead, e)
		}
	}
	c.st.Entries = len(c.table)
	return dead
}

// removeLocked deletes the entries of table[lo:hi] that drop picks and
// returns them.
func (c *Cache[V]) removeLocked(lo, hi int, drop func(*Entry[V]) bool) []Entry[V] {
	var out []Entry[V]
	w := lo
	for i := lo; i < hi; i++ {
		if drop(&c.table[i]) {
			out = append(out, c.table[i])
			continue
		}
		c.table[w] = c.table[i]
		w++
	}
	c.table = slices.Delete(c.table, w, hi)
	return out
}

// startIndex is the index of the first entry at or after (space, a).
func (c *Cache[V]) startIndex(space int, a uintptr) int {
	i, _ := slices.BinarySearchFunc(c.table, a, func(e Entry[V], a uintptr) int {
		switch {
		case e.Space != space:
			return cmp.Compare(e.Space, space)
		case e.Start < a:
			return -1
		case e.Start > a:
			return 1
		}
		return 0
	})
	return i
}

// startsIn is the index range of the entries of space starting in [lo, hi).
func (c *Cache[V]) startsIn(space int, lo, hi uintptr) (int, int) {
	return c.startIndex(space, lo), c.startIndex(space, hi)
}

// overlapLocked is an index range holding every entry of space that
// overlaps s (and maybe others): no entry is longer than maxLen.
func (c *Cache[V]) overlapLocked(space int, s Span) (int, int) {
	return c.startsIn(space, s.Start-min(s.Start, c.maxLen), s.End)
}

// coverLocked finds an entry of space covering s: the last-starting one.
func (c *Cache[V]) coverLocked(space int, s Span) (int, bool) {
	lo, hi := c.startsIn(space, s.End-min(s.End, c.maxLen), s.Start+1)
	for i := hi - 1; i >= lo; i-- {
		if c.table[i].End >= s.End {
			return i, true
		}
	}
	return 0, false
}

// lruLocked is the least recently used entry no one holds, or -1.
func (c *Cache[V]) lruLocked() int {
	lru := -1
	for i, e := range c.table {
		if e.refs == 0 && (lru < 0 || e.used < c.table[lru].used) {
			lru = i
		}
	}
	return lru
}

// growLocked doubles the table's capacity, under the cache lock: on the Go
// heap, or (UseTable) by calling the table function with the lock held.
func (c *Cache[V]) growLocked() error {
	n := max(2*cap(c.table), InitialEntries)
	if c.grow == nil {
		c.table = append(make([]Entry[V], 0, n), c.table...)
	} else {
		mem, err := c.grow(c.tableMem, n*entrySize[V]())
		if mem != nil {
			c.table, c.tableMem = entriesIn[V](mem, n)[:len(c.table)], mem
		}
		if err != nil {
			return fmt.Errorf("grow the registration table to %d entries: %w", n, err)
		}
	}
	c.st.Grows++
	c.st.Capacity = cap(c.table)
	return nil
}
