package hostmem

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gotune/gotune/internal/regcache"
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
const InitialEntries = regcache.InitialEntries

// RegCache maps address ranges to registrations (mlock of whole pages,
// merged with any registration they overlap) and drops them when the
// allocator it is hooked to releases their memory. The payload of an entry
// says whether it pinned: no Go pointers, so the hooked table may live in
// allocator memory.
//
// Lock discipline of the safe (heap) form: the cache lock is never held
// while calling the allocator or running a hook; the release hook unpins
// at once, lock-free (MADV_DONTNEED is refused on locked pages, and a pin
// must not outlive the pages it pinned), and queues the table update for
// the next Register or Lookup.
type RegCache struct {
	alloc  *Allocator
	cache  *regcache.Cache[bool]
	unhook func()
	pinned atomic.Int64 // pinned entries: the hook skips munlock when none

	pmu  sync.Mutex // guards pins only
	pins struct {
		pinned, unpinned int64
		err              string
	}
}

// NewRegCache returns a cache hooked to a's releases, its table kept as
// storage says (HeapEntries is the safe one).
func NewRegCache(a *Allocator, storage EntryStorage) (*RegCache, error) {
	c := &RegCache{alloc: a}
	c.cache = regcache.New(regcache.Config[bool]{Overlap: regcache.Merge, Release: c.unpin, Absorb: c.absorbed})
	hook := c.enqueue
	if storage == HookedEntries {
		if err := c.cache.UseTable(c.growLocked); err != nil {
			return nil, fmt.Errorf("registration cache: %w", err)
		}
		hook = c.invalidateNow
	}
	c.unhook = a.OnRelease(hook)
	return c, nil
}

func pageSpan(b []byte) regcache.Span {
	return regcache.Align(sys.AddressOf(b), len(b), uintptr(sys.PageSize))
}

// Register returns the registration covering b: a hit, or a miss that pins
// b's pages (merged with any registration it overlaps) and inserts it.
func (c *RegCache) Register(b []byte) (*Registration, error) {
	if len(b) == 0 {
		return nil, errors.New("register: empty buffer")
	}
	e, hit, err := c.cache.Get(0, pageSpan(b), false)
	if err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	if hit {
		return registration(e), nil
	}
	s := e.Span // b's pages and those of the registrations it overlaps
	pinned, err := c.pin(s)
	if err != nil {
		return nil, fmt.Errorf("register %#x+%d: %w", s.Start, s.Len(), err)
	}
	if e, err = c.cache.Insert(0, s, pinned, false); err != nil {
		return nil, fmt.Errorf("register %#x+%d: %w", s.Start, s.Len(), err)
	}
	return registration(e), nil
}

// pin locks s, or records why the kernel refused: a no-op registration.
func (c *RegCache) pin(s regcache.Span) (bool, error) {
	err := sys.Mlock(s.Start, s.Len())
	if err != nil && !errors.Is(err, sys.ErrNotSupported) {
		return false, err
	}
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if err != nil {
		c.pins.unpinned++
		if c.pins.err == "" {
			c.pins.err = err.Error()
		}
		return false, nil
	}
	c.pins.pinned++
	c.pinned.Add(1)
	return true, nil
}

// unpin is the cache's release: the range's memory is released, or the
// cache is closing. A range unmapped already is unlocked already: munlock's
// complaint about it says nothing more.
func (c *RegCache) unpin(e regcache.Entry[bool]) error {
	if e.Val {
		sys.Munlock(e.Start, e.Len())
		c.pinned.Add(-1)
	}
	return nil
}

// absorbed is told of a registration merged into a wider one: its pages
// stay locked, by the wider one's mlock.
func (c *RegCache) absorbed(e regcache.Entry[bool]) {
	if e.Val {
		c.pinned.Add(-1)
	}
}

// Lookup returns the registration covering b, if there is one.
func (c *RegCache) Lookup(b []byte) (*Registration, bool) {
	if len(b) == 0 {
		return nil, false
	}
	e, ok := c.cache.Find(0, pageSpan(b))
	if !ok {
		return nil, false
	}
	return registration(e), true
}

func registration(e regcache.Entry[bool]) *Registration {
	return &Registration{Addr: e.Start, Len: e.Len(), Pinned: e.Val}
}

// growLocked moves the hooked table into n bytes of allocator memory; the
// cache calls it holding the cache lock. DELIBERATELY UNSAFE (hazard H1):
// freeing the old table may purge it; the purge runs the release hook
// (invalidateNow) on this goroutine, which takes the cache lock that this
// goroutine already holds.
func (c *RegCache) growLocked(old []byte, n int) ([]byte, error) {
	return regcache.Move(c.alloc, old, n)
}

// enqueue is the safe form's release hook: unpin at once, lock-free (the
// kernel call needs no table), and queue the table update for the next
// Register or Lookup.
func (c *RegCache) enqueue(addr uintptr, n int) {
	if c.pinned.Load() > 0 {
		sys.Munlock(addr, n) // pages not locked: a no-op
	}
	c.cache.Queue(0, regcache.Span{Start: addr, End: addr + uintptr(n)})
}

// invalidateNow is the unsafe form's release hook: it takes the cache lock.
func (c *RegCache) invalidateNow(addr uintptr, n int) {
	c.cache.Drop(0, regcache.Span{Start: addr, End: addr + uintptr(n)})
}

// Stats returns a snapshot of the counters.
func (c *RegCache) Stats() RegStats {
	s := c.cache.Stats()
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return RegStats{Hits: s.Hits, Misses: s.Misses, Pinned: c.pins.pinned, Unpinned: c.pins.unpinned, PinError: c.pins.err,
		Invalidations: s.Invalidations, Queued: s.Queued, Grows: s.Grows, Entries: s.Entries, Capacity: s.Capacity}
}

// Close unhooks the cache, unpins every entry and frees the table.
func (c *RegCache) Close() error {
	c.unhook() // takes the allocator's lock: not under the cache's
	if err := c.cache.Close(); err != nil {
		return fmt.Errorf("close registration cache: %w", err)
	}
	return nil
}
