package hostmem

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gotune/gotune/internal/sys"
)

// Registration is a registered (pinned) range: whole pages.
type Registration struct {
	Addr   uintptr
	Len    int
	Pinned bool // false: the kernel refused mlock and this is a no-op registration (RegStats.PinError says why)
}

// RegStats count what a registration cache did.
type RegStats struct {
	Hits, Misses  int64
	Pinned        int64  // registrations that locked memory
	Unpinned      int64  // no-op registrations: mlock was refused
	PinError      string // the first refusal, as the kernel put it
	Invalidations int64  // entries dropped because their memory was released
	Queued        int64  // release events that went through the queue (heap storage)
	Grows         int64  // table growths
	Entries       int    // entries now
	Capacity      int    // table capacity now
}

// InitialEntries is the capacity of a new cache's table; registering more
// live ranges than this grows it.
const InitialEntries = 8

// entry is a table slot. It holds no Go pointers, so a table may live in
// memory outside the Go heap.
type entry struct {
	start, end uintptr
	pinned     bool
}

const entrySize = int(unsafe.Sizeof(entry{}))

type span struct{ start, end uintptr }

// RegCache maps address ranges to registrations and drops them when the
// allocator it is hooked to releases their memory.
//
// Lock discipline of the safe (heap) form: mu, the cache lock, is never
// held while calling the allocator or running a hook. The release hook
// takes only qmu, the queue's own lock, to append an invalidation;
// Register and Lookup drain the queue (mu, then qmu: never the other way)
// before they look anything up. The kernel's pin goes at once, in the hook,
// without any lock: MADV_DONTNEED is refused on locked pages, and a pin must
// not outlive the pages it pinned.
type RegCache struct {
	alloc   *Allocator
	storage EntryStorage
	unhook  func()
	pinned  atomic.Int64 // pinned entries: the hook skips munlock when none

	mu       sync.Mutex // the cache lock
	table    []entry    // sorted by start, disjoint; cap is the capacity
	tableMem []byte     // HookedEntries: the allocator buffer behind table
	closed   bool
	st       RegStats

	qmu   sync.Mutex // guards queue only
	queue []span
}

// NewRegCache returns a cache hooked to a's releases, its table kept as
// storage says (HeapEntries is the safe one).
func NewRegCache(a *Allocator, storage EntryStorage) (*RegCache, error) {
	c := &RegCache{alloc: a, storage: storage}
	if storage == HeapEntries {
		c.table = make([]entry, 0, InitialEntries)
		c.unhook = a.OnRelease(c.enqueue)
	} else {
		mem, err := a.Alloc(InitialEntries * entrySize)
		if err != nil {
			return nil, fmt.Errorf("registration cache: table: %w", err)
		}
		c.tableMem, c.table = mem, entriesIn(mem, InitialEntries)
		c.unhook = a.OnRelease(c.invalidateNow)
	}
	c.st.Capacity = cap(c.table)
	return c, nil
}

// entriesIn views the first n entries' worth of mem (allocator memory) as a
// table of capacity n.
func entriesIn(mem []byte, n int) []entry {
	return unsafe.Slice((*entry)(unsafe.Pointer(unsafe.SliceData(mem))), n)[:0]
}

func pageSpan(b []byte) span {
	page := uintptr(sys.PageSize)
	a := sys.AddressOf(b)
	return span{a &^ (page - 1), (a + uintptr(len(b)) + page - 1) &^ (page - 1)}
}

// Register returns the registration covering b: a hit, or a miss that pins
// b's pages (merged with any registration it overlaps) and inserts it.
func (c *RegCache) Register(b []byte) (*Registration, error) {
	if len(b) == 0 {
		return nil, errors.New("register: empty buffer")
	}
	s := pageSpan(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("register: registration cache closed")
	}
	c.drainLocked()
	if i, ok := c.findLocked(s); ok {
		c.st.Hits++
		return c.table[i].registration(), nil
	}
	c.st.Misses++
	lo, hi := c.overlapLocked(s)
	for _, e := range c.table[lo:hi] { // merge: the new entry covers them all
		s.start, s.end = min(s.start, e.start), max(s.end, e.end)
	}
	e := entry{start: s.start, end: s.end, pinned: true}
	if err := sys.Mlock(s.start, int(s.end-s.start)); err != nil {
		if !errors.Is(err, sys.ErrNotSupported) {
			return nil, fmt.Errorf("register %#x+%d: %w", s.start, s.end-s.start, err)
		}
		e.pinned = false
		c.st.Unpinned++
		if c.st.PinError == "" {
			c.st.PinError = err.Error()
		}
	} else {
		c.st.Pinned++
	}
	for _, old := range c.table[lo:hi] {
		if old.pinned {
			c.pinned.Add(-1)
		}
	}
	c.table = slices.Delete(c.table, lo, hi)
	if len(c.table) == cap(c.table) {
		if err := c.growLocked(); err != nil {
			if e.pinned {
				sys.Munlock(s.start, int(s.end-s.start))
			}
			return nil, fmt.Errorf("register %#x+%d: %w", s.start, s.end-s.start, err)
		}
	}
	c.table = slices.Insert(c.table, lo, e)
	if e.pinned {
		c.pinned.Add(1)
	}
	c.st.Entries = len(c.table)
	return e.registration(), nil
}

// Lookup returns the registration covering b, if there is one.
func (c *RegCache) Lookup(b []byte) (*Registration, bool) {
	if len(b) == 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drainLocked()
	if i, ok := c.findLocked(pageSpan(b)); ok {
		return c.table[i].registration(), true
	}
	return nil, false
}

func (e entry) registration() *Registration {
	return &Registration{Addr: e.start, Len: int(e.end - e.start), Pinned: e.pinned}
}

// findLocked returns the entry containing s.
func (c *RegCache) findLocked(s span) (int, bool) {
	i, _ := slices.BinarySearchFunc(c.table, s.start, func(e entry, a uintptr) int {
		switch {
		case e.end <= a:
			return -1
		case e.start > a:
			return 1
		}
		return 0
	})
	if i < len(c.table) && c.table[i].start <= s.start && s.end <= c.table[i].end {
		return i, true
	}
	return 0, false
}

// overlapLocked returns the index range of entries overlapping s.
func (c *RegCache) overlapLocked(s span) (lo, hi int) {
	lo, _ = slices.BinarySearchFunc(c.table, s.start, func(e entry, a uintptr) int {
		if e.end <= a {
			return -1
		}
		return 1
	})
	hi = lo
	for hi < len(c.table) && c.table[hi].start < s.end {
		hi++
	}
	return lo, hi
}

// growLocked doubles the table's capacity, under the cache lock.
func (c *RegCache) growLocked() error {
	n := max(2*cap(c.table), InitialEntries)
	if c.storage == HeapEntries {
		c.table = append(make([]entry, 0, n), c.table...)
	} else {
		// DELIBERATELY UNSAFE (hazard H1): the allocator is called with the
		// cache lock held. Freeing the old table may purge it; the purge
		// runs the release hook (invalidateNow) on this goroutine, which
		// takes the cache lock that this goroutine already holds.
		mem, err := c.alloc.Alloc(n * entrySize)
		if err != nil {
			return fmt.Errorf("grow registration table to %d entries: %w", n, err)
		}
		old := c.tableMem
		c.table, c.tableMem = append(entriesIn(mem, n), c.table...), mem
		if err := c.alloc.Free(old); err != nil {
			return fmt.Errorf("grow registration table: free the old one: %w", err)
		}
	}
	c.st.Grows++
	c.st.Capacity = cap(c.table)
	return nil
}

// enqueue is the safe form's release hook: unpin at once, lock-free (the
// kernel call needs no table), and queue the table update for the next
// Register or Lookup.
func (c *RegCache) enqueue(addr uintptr, n int) {
	if c.pinned.Load() > 0 {
		sys.Munlock(addr, n) // pages not locked: a no-op
	}
	c.qmu.Lock()
	c.queue = append(c.queue, span{addr, addr + uintptr(n)})
	c.qmu.Unlock()
}

// drainLocked applies queued invalidations; the cache lock is held.
func (c *RegCache) drainLocked() {
	c.qmu.Lock()
	q := c.queue
	c.queue = nil
	c.qmu.Unlock()
	c.st.Queued += int64(len(q))
	for _, s := range q {
		c.dropLocked(s)
	}
}

// invalidateNow is the unsafe form's release hook: it takes the cache lock.
func (c *RegCache) invalidateNow(addr uintptr, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(span{addr, addr + uintptr(n)})
}

// dropLocked removes (and unpins) every entry overlapping s.
func (c *RegCache) dropLocked(s span) {
	lo, hi := c.overlapLocked(s)
	for _, e := range c.table[lo:hi] {
		if e.pinned {
			sys.Munlock(e.start, int(e.end-e.start)) // may be gone already: nothing to unlock then
			c.pinned.Add(-1)
		}
	}
	c.st.Invalidations += int64(hi - lo)
	c.table = slices.Delete(c.table, lo, hi)
	c.st.Entries = len(c.table)
}

// Stats returns a snapshot of the counters.
func (c *RegCache) Stats() RegStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drainLocked()
	return c.st
}

// Close unhooks the cache, unpins every entry and frees the table.
func (c *RegCache) Close() error {
	c.unhook() // takes the allocator's lock: not under ours
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.drainLocked()
	for _, e := range c.table {
		if e.pinned {
			// A range unmapped behind the allocator's back is unlocked
			// already; munlock's complaint about it says nothing more.
			sys.Munlock(e.start, int(e.end-e.start))
		}
	}
	c.pinned.Store(0)
	c.table = nil
	mem := c.tableMem
	c.tableMem = nil
	c.mu.Unlock()
	if mem != nil { // the allocator is called without the cache lock
		if err := c.alloc.Free(mem); err != nil {
			return fmt.Errorf("close registration cache: free the table: %w", err)
		}
	}
	return nil
}
