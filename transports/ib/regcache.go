package ib

import (
	"fmt"

	"github.com/gotune/gotune/internal/regcache"
	"github.com/gotune/gotune/internal/sys"
)

// region is what the cache keeps per registered range: the verbs MR in
// production, a fake in unit tests.
type region interface {
	Keys() (lkey, rkey uint32)
	Close() error
}

// registrar registers [addr, addr+n).
type registrar func(addr uintptr, n int) (region, error)

// RegStats count what the registration cache did.
type RegStats struct {
	Hits, Misses  int64
	Invalidations int64 // entries dropped because their memory was released
	Deferred      int64 // invalidated while in use: deregistered when released
	Entries       int
}

// regCache maps page ranges to memory regions and drops them when the
// memory under them is released (Invalidate, called from an allocator's
// release hook). Entries may overlap; a new one replaces the unused ones
// it covers. A region in use (between get and put) that is invalidated
// leaves the cache at once and is deregistered at its last put.
//
// Lock discipline (hazard H1): registering happens outside the cache lock,
// and Invalidate only queues (regcache.Cache.Queue), so a region whose
// memory was released is never handed out again and a hook firing inside
// a registration never waits for the cache.
type regCache struct {
	reg   registrar
	cache *regcache.Cache[*regEntry]
}

// regEntry is a registered range: the payload of its cache entry.
type regEntry struct {
	span regcache.Span
	r    region
}

func newRegCache(reg registrar) *regCache {
	return &regCache{reg: reg, cache: regcache.New(regcache.Config[*regEntry]{
		Overlap: regcache.DropCovered,
		Release: func(e regcache.Entry[*regEntry]) error { return e.Val.r.Close() },
	})}
}

// Invalidate drops every region overlapping [addr, addr+n) before the next
// get: the allocator's release hook. It takes the queue's lock only.
func (c *regCache) Invalidate(addr uintptr, n int) {
	c.cache.Queue(0, regcache.Span{Start: addr, End: addr + uintptr(n)})
}

// get returns a region covering [addr, addr+n), holding a reference until
// put.
func (c *regCache) get(addr uintptr, n int) (*regEntry, error) {
	s := regcache.Align(addr, n, uintptr(sys.PageSize))
	e, hit, err := c.cache.Get(0, s, true)
	if err != nil {
		return nil, fmt.Errorf("register %#x+%d: %w", addr, n, err)
	}
	if hit {
		return e.Val, nil
	}
	r, err := c.reg(s.Start, s.Len()) // outside the cache lock
	if err != nil {
		return nil, err
	}
	if e, err = c.cache.Insert(0, s, &regEntry{span: s, r: r}, true); err != nil {
		return nil, fmt.Errorf("register %#x+%d: %w", addr, n, err)
	}
	return e.Val, nil
}

// put releases a reference taken by get.
func (c *regCache) put(e *regEntry) { c.cache.Put(0, e.span, e) }

// Stats returns a snapshot (after applying queued invalidations).
func (c *regCache) Stats() RegStats {
	s := c.cache.Stats()
	return RegStats{Hits: s.Hits, Misses: s.Misses, Invalidations: s.Invalidations, Deferred: s.Deferred, Entries: s.Entries}
}

// close deregisters every region.
func (c *regCache) close() { c.cache.Close() }
