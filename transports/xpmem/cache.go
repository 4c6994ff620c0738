package xpmem

import (
	"fmt"
	"sync/atomic"

	"github.com/gotune/gotune/internal/regcache"
)

// TableAllocator is where the unsafe form (xpmem.hook=lock) keeps the
// cache's table: an allocator whose release hook reaches Invalidate
// (hostmem.Allocator), as a malloc-backed cache in C would.
type TableAllocator = regcache.TableMemory

// Stats count what a rank's attachment cache and notice board did.
type Stats struct {
	Hits, Misses  int64
	Attaches      int64 // attach calls (misses, with xpmem.cache=0 one per copy)
	Detaches      int64
	Evictions     int64 // least recently used entries dropped for room
	Invalidations int64 // entries dropped because a peer released memory under them
	Notices       int64 // peers' release notices read
	Flushes       int64 // a peer's board overran: all its entries dropped
	Posted        int64 // release notices this rank posted (its allocator's hook)
	Grows         int64 // table growths
	Entries       int
}

// cache holds a rank's attachments of its peers' memory: entries of
// address space peer, the payload where the range is attached here (no Go
// pointers, so the unsafe form's table may live in allocator memory).
//
// Lock discipline (hazard H1): the cache lock guards the table and is
// never held across an attach, a detach, an allocation or a hook. The
// release hook (Invalidate) does not take it: it posts on this rank's own
// board (board.mu only), and peers drain their view of the board before
// each lookup. LockedHook (xpmem.hook=lock) is the unsafe form.
type cache struct {
	dev   device
	align uintptr
	max   int // entries kept; 0: attach and detach for every copy

	entries *regcache.Cache[uintptr]
	talloc  TableAllocator // unsafe form only

	detaches, notices, flushes atomic.Int64
	posted                     atomic.Int64 // release notices posted by Invalidate
}

func newCache(dev device, align, max int) *cache {
	c := &cache{dev: dev, align: uintptr(align), max: max}
	c.entries = regcache.New(regcache.Config[uintptr]{Limit: max, Release: func(e regcache.Entry[uintptr]) error { return c.detach(e.Val) }})
	return c
}

// span is the aligned range an attachment for [addr, addr+n) covers.
func (c *cache) span(addr uintptr, n int) regcache.Span { return regcache.Align(addr, n, c.align) }

// get returns where [addr, addr+n) of peer's memory is attached here, and
// whether the caller must detach it after the copy (nothing cached).
func (c *cache) get(peer int, apid int64, addr uintptr, n int) (local uintptr, temp bool, err error) {
	s := c.span(addr, n)
	e, hit, err := c.entries.Get(peer, s, false)
	if err != nil {
		return 0, false, fmt.Errorf("xpmem: attachment cache: %w", err)
	}
	if hit {
		return e.Val + (addr - e.Start), false, nil
	}
	at, err := c.dev.Attach(apid, s.Start, s.Len()) // outside the cache lock
	if err != nil {
		return 0, false, fmt.Errorf("attach xpmem segment of rank %d: %w", peer, err)
	}
	if c.max == 0 {
		return at + (addr - s.Start), true, nil
	}
	if _, err := c.entries.Insert(peer, s, at, false); err != nil {
		return 0, false, fmt.Errorf("xpmem attachment cache: %w", err)
	}
	return at + (addr - s.Start), false, nil
}

// growLocked moves the unsafe form's table into n bytes of the table
// allocator's memory; the cache calls it holding the cache lock.
// DELIBERATELY UNSAFE (hazard H1): freeing the old table may purge it; the
// purge runs the release hook on this goroutine, and the unsafe hook takes
// the cache lock this goroutine holds.
func (c *cache) growLocked(old []byte, n int) ([]byte, error) {
	return regcache.Move(c.talloc, old, n)
}

// useTable moves the table into a's memory: the unsafe form.
func (c *cache) useTable(a TableAllocator) error {
	c.talloc = a
	if err := c.entries.UseTable(c.growLocked); err != nil {
		return fmt.Errorf("xpmem attachment table: %w", err)
	}
	return nil
}

// drop applies a peer's release notices: detaches every entry of peer
// overlapping spans (all of the peer's when all), counting them as
// invalidations.
func (c *cache) drop(peer int, spans []regcache.Span, all bool) {
	c.notices.Add(int64(len(spans)))
	if all {
		c.flushes.Add(1)
		c.entries.DropSpace(peer)
		return
	}
	c.entries.Drop(peer, spans...)
}

func (c *cache) detach(local uintptr) error {
	err := c.dev.Detach(local)
	c.detaches.Add(1)
	return err
}

func (c *cache) stats() Stats {
	s := c.entries.Stats()
	return Stats{Hits: s.Hits, Misses: s.Misses, Attaches: s.Misses, Detaches: c.detaches.Load(),
		Evictions: s.Evictions, Invalidations: s.Invalidations, Notices: c.notices.Load(), Flushes: c.flushes.Load(),
		Posted: c.posted.Load(), Grows: s.Grows, Entries: s.Entries}
}

// close detaches everything and frees the unsafe form's table.
func (c *cache) close() error { return c.entries.Close() }
