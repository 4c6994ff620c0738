package knem

import (
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports/sm"
)

// Copier is the KNEM single-copy mechanism for the sm engine (an
// sm.Exporter): the side whose buffer the peer reaches declares it a
// region, the cookie travels in the rendezvous control message, and the
// peer copies through it with one inline-copy ioctl.
type Copier struct {
	p     Params
	dev   device
	info  Info
	flags uint32 // copy flags: KnemFlagDMA when knem.dma allows and the driver has one
	route func(n int) bool

	// Cached regions (knem.regions=cached), by buffer. mu guards them and
	// the counters: Invalidate comes from an allocator's release hook on
	// any goroutine. Nothing under mu allocates from a hooked allocator or
	// calls a hook (hazard H1): the map lives in the Go heap.
	mu      sync.Mutex
	regions map[regionKey]*region
	clock   uint64
	st      Stats
}

type regionKey struct {
	addr     uintptr
	n        int
	writable bool
}

type region struct {
	cookie uint64
	used   uint64 // clock at the last export
}

// Stats count what the copier did.
type Stats struct {
	Created     int64 // regions declared
	Destroyed   int64 // regions destroyed by the copier (single-use ones the peer never used, evicted and invalidated cached ones)
	Hits        int64 // exports answered from the cache
	Invalidated int64 // cached regions dropped by Invalidate
	Copies      int64 // inline copies made
}

// NewCopier opens the device p names and returns the mechanism: messages
// from p.Threshold up go by single copy, or exactly those route accepts
// when route is not nil (a profile's ranges).
func NewCopier(p Params, route func(n int) bool) (*Copier, error) {
	if p.Device == Fake {
		if err := sys.AllowAnyTracer(); err != nil { // the fake copies with process_vm_*
			return nil, err
		}
	}
	d, info, err := open(p)
	if err != nil {
		return nil, err
	}
	c := &Copier{p: p, dev: d, info: info, route: route, regions: map[regionKey]*region{}}
	if p.DMA != "off" && info.DMA() {
		c.flags = sys.KnemFlagDMA
	}
	return c, nil
}

func (c *Copier) Name() string          { return "knem" }
func (c *Copier) Pull() bool            { return c.p.Pull }
func (c *Copier) Rendezvous(n int) bool { return sm.RouteBySize(c.route, c.p.Threshold, n) }

// Copy is never the way: KNEM reaches a peer's memory only through its
// cookie (CopyHandle).
func (c *Copier) Copy(pid int, _ []byte, _ sm.Place, remote uintptr, _ bool) error {
	return fmt.Errorf("knem: copy at %#x of pid %d without the peer's cookie", remote, pid)
}

// Export declares buf a region the peer may read (or write): a
// single-use one, or a cached one for this very buffer.
func (c *Copier) Export(buf []byte, _ sm.Place, writable bool) (uint64, error) {
	addr := sys.AddressOf(buf)
	if !c.p.Cached {
		cookie, err := c.dev.CreateRegion(addr, len(buf), writable, sys.KnemFlagSingleUse)
		if err != nil {
			return 0, c.refusal(err)
		}
		c.mu.Lock()
		c.st.Created++
		c.mu.Unlock()
		return cookie, nil
	}
	k := regionKey{addr, len(buf), writable}
	c.mu.Lock()
	c.clock++
	if r := c.regions[k]; r != nil {
		r.used = c.clock
		c.st.Hits++
		c.mu.Unlock()
		return r.cookie, nil
	}
	c.mu.Unlock()
	cookie, err := c.dev.CreateRegion(addr, len(buf), writable, 0)
	if err != nil {
		return 0, c.refusal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.Created++
	c.regions[k] = &region{cookie: cookie, used: c.clock}
	for len(c.regions) > c.p.Cache {
		c.evictLocked()
	}
	return cookie, nil
}

// evictLocked destroys the least recently exported cached region.
func (c *Copier) evictLocked() {
	var oldest regionKey
	var at uint64
	first := true
	for k, r := range c.regions {
		if first || r.used < at {
			oldest, at, first = k, r.used, false
		}
	}
	c.destroyLocked(oldest)
}

func (c *Copier) destroyLocked(k regionKey) {
	r := c.regions[k]
	delete(c.regions, k)
	c.dev.DestroyRegion(r.cookie) // fails only for a cookie already gone
	c.st.Destroyed++
}

// refusal marks what means "not here" as ErrNotSupported: EPERM, the
// driver's refusal of another user's region.
func (c *Copier) refusal(err error) error {
	if errors.Is(err, syscall.EPERM) {
		return sys.NotSupported("knem", "the driver refused", err)
	}
	return err
}

// CopyHandle copies between local and the peer's region handle names:
// from it (pull) or into it.
func (c *Copier) CopyHandle(pid int, local []byte, _ sm.Place, handle uint64, _ uintptr, pull bool) error {
	err := c.dev.InlineCopy(pid, local, handle, 0, !pull, c.flags)
	c.mu.Lock()
	c.st.Copies++
	c.mu.Unlock()
	if err != nil {
		return c.refusal(err)
	}
	return nil
}

// Release gives back a region this side declared: a single-use one the
// peer never used is destroyed (a used one is gone already); a cached one
// stays.
func (c *Copier) Release(handle uint64, used bool) {
	if c.p.Cached || used {
		return
	}
	if err := c.dev.DestroyRegion(handle); err == nil {
		c.mu.Lock()
		c.st.Destroyed++
		c.mu.Unlock()
	}
}

// Invalidate destroys the cached regions that overlap [addr, addr+n):
// their pages are going back to the kernel, and a region keeps the pages
// it pinned, so a later copy would reach the old ones.
func (c *Copier) Invalidate(addr uintptr, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.regions {
		if k.addr < addr+uintptr(n) && addr < k.addr+uintptr(k.n) {
			c.destroyLocked(k)
			c.st.Invalidated++
		}
	}
}

// Stats returns the counters.
func (c *Copier) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

// Info is what the device said when the copier opened it.
func (c *Copier) Info() Info { return c.info }

// Close closes the device: the driver destroys the regions left.
func (c *Copier) Close() error {
	c.mu.Lock()
	clear(c.regions)
	c.mu.Unlock()
	return c.dev.Close()
}
