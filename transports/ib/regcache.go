package ib

import (
	"fmt"
	"slices"
	"sync"

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
// release hook).
//
// Lock discipline (hazard H1): mu, the cache lock, is never held while
// registering, deregistering, or calling anything that may allocate
// through a hooked allocator or run a release hook. Invalidate takes only
// qmu, the queue's own lock, to append a span; Get drains the queue (mu,
// then qmu: never the other way) before it looks anything up, so a region
// whose memory was released is never handed out again.
type regCache struct {
	reg registrar

	mu      sync.Mutex
	entries []*regEntry // sorted by start; may overlap
	st      RegStats
	closed  bool

	qmu   sync.Mutex
	queue []span

	// ignoreInvalidations is the deliberately unsafe twin for tests: a
	// released range keeps its stale region (the payload check must catch it).
	ignoreInvalidations bool
}

type span struct{ start, end uintptr }

type regEntry struct {
	span
	r     region
	refs  int
	stale bool // invalidated while in use: deregistered at the last put
}

func newRegCache(reg registrar) *regCache { return &regCache{reg: reg} }

func pages(addr uintptr, n int) span {
	pg := uintptr(sys.PageSize)
	return span{addr &^ (pg - 1), (addr + uintptr(n) + pg - 1) &^ (pg - 1)}
}

// Invalidate drops every region overlapping [addr, addr+n) before the next
// Get: the allocator's release hook. It takes the queue's lock only.
func (c *regCache) Invalidate(addr uintptr, n int) {
	c.qmu.Lock()
	c.queue = append(c.queue, span{addr, addr + uintptr(n)})
	c.qmu.Unlock()
}

// get returns a region covering [addr, addr+n), holding a reference until
// put. Regions to deregister are closed outside the cache lock.
func (c *regCache) get(addr uintptr, n int) (*regEntry, error) {
	s := pages(addr, n)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("register %#x+%d: registration cache closed", addr, n)
	}
	dead := c.drainLocked()
	for _, e := range c.entries {
		if e.start <= s.start && s.end <= e.end {
			e.refs++
			c.st.Hits++
			c.mu.Unlock()
			closeAll(dead)
			return e, nil
		}
	}
	c.st.Misses++
	c.mu.Unlock()
	closeAll(dead)
	// Register outside the lock.
	r, err := c.reg(s.start, int(s.end-s.start))
	if err != nil {
		return nil, err
	}
	e := &regEntry{span: s, r: r, refs: 1}
	c.mu.Lock()
	dead = c.drainLocked()
	// Drop unused entries the new one covers.
	c.entries = slices.DeleteFunc(c.entries, func(o *regEntry) bool {
		if o.refs == 0 && s.start <= o.start && o.end <= s.end {
			dead = append(dead, o.r)
			return true
		}
		return false
	})
	i, _ := slices.BinarySearchFunc(c.entries, s.start, func(o *regEntry, a uintptr) int {
		if o.start < a {
			return -1
		}
		return 1
	})
	c.entries = slices.Insert(c.entries, i, e)
	c.st.Entries = len(c.entries)
	c.mu.Unlock()
	closeAll(dead)
	return e, nil
}

// put releases a reference taken by get.
func (c *regCache) put(e *regEntry) {
	c.mu.Lock()
	e.refs--
	var dead region
	if e.refs == 0 && e.stale {
		dead = e.r
	}
	c.mu.Unlock()
	if dead != nil {
		dead.Close()
	}
}

// drainLocked applies queued invalidations and returns the regions to
// deregister (after the lock is dropped).
func (c *regCache) drainLocked() []region {
	c.qmu.Lock()
	q := c.queue
	c.queue = nil
	c.qmu.Unlock()
	if len(q) == 0 || c.ignoreInvalidations {
		return nil
	}
	var dead []region
	for _, s := range q {
		c.entries = slices.DeleteFunc(c.entries, func(e *regEntry) bool {
			if e.end <= s.start || s.end <= e.start {
				return false
			}
			c.st.Invalidations++
			if e.refs > 0 {
				e.stale = true
				c.st.Deferred++
			} else {
				dead = append(dead, e.r)
			}
			return true
		})
	}
	c.st.Entries = len(c.entries)
	return dead
}

func closeAll(rs []region) {
	for _, r := range rs {
		r.Close()
	}
}

// Stats returns a snapshot (after applying queued invalidations).
func (c *regCache) Stats() RegStats {
	c.mu.Lock()
	dead := c.drainLocked()
	st := c.st
	c.mu.Unlock()
	closeAll(dead)
	return st
}

// close deregisters every region.
func (c *regCache) close() {
	c.mu.Lock()
	c.closed = true
	var dead []region
	for _, e := range c.entries {
		dead = append(dead, e.r)
	}
	c.entries = nil
	c.mu.Unlock()
	closeAll(dead)
}
