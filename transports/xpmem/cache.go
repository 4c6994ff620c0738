package xpmem

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gotune/gotune/internal/sys"
)

// TableAllocator is where the unsafe form (xpmem.hook=lock) keeps the
// cache's table: an allocator whose release hook reaches Invalidate
// (hostmem.Allocator), as a malloc-backed cache in C would.
type TableAllocator interface {
	Alloc(n int) ([]byte, error)
	Free(b []byte) error
}

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

// entry is one cached attachment. It holds no Go pointers, so the unsafe
// form's table may live in allocator memory.
type entry struct {
	peer       int
	start, end uintptr // the peer's range, aligned
	local      uintptr // where it is attached here
	used       uint64  // the cache's clock at the last use
}

const entrySize = int(unsafe.Sizeof(entry{}))

// initialEntries is a table's first capacity; more live attachments grow it.
const initialEntries = 8

// cache holds a rank's attachments of its peers' memory.
//
// Lock discipline (hazard H1): mu, the cache lock, guards the table and is
// never held across an attach, a detach, an allocation or a hook. The
// release hook (Invalidate) does not take it: it posts on this rank's own
// board (board.mu only), and peers drain their view of the board before
// each lookup. lockedHook (xpmem.hook=lock) is the unsafe form.
type cache struct {
	dev   device
	align uintptr
	max   int // entries kept; 0: attach and detach for every copy

	mu       sync.Mutex
	table    []entry
	tableMem []byte         // unsafe form: the allocator memory behind table
	talloc   TableAllocator // unsafe form only
	clock    uint64
	st       Stats
	closed   bool
	posted   atomic.Int64 // Stats.Posted, counted without the lock
}

func newCache(dev device, align, max int) *cache {
	return &cache{dev: dev, align: uintptr(align), max: max, table: make([]entry, 0, initialEntries)}
}

// span is the aligned range an attachment for [addr, addr+n) covers.
func (c *cache) span(addr uintptr, n int) (uintptr, uintptr) {
	start := addr &^ (c.align - 1)
	end := (addr + uintptr(n) + c.align - 1) &^ (c.align - 1)
	return start, end
}

// get returns where [addr, addr+n) of peer's memory is attached here, and
// whether the caller must detach it after the copy (nothing cached).
func (c *cache) get(peer int, apid int64, addr uintptr, n int) (local uintptr, temp bool, err error) {
	start, end := c.span(addr, n)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, false, fmt.Errorf("xpmem: attachment cache closed")
	}
	for i := range c.table {
		e := &c.table[i]
		if e.peer == peer && e.start <= addr && addr+uintptr(n) <= e.end {
			c.clock++
			e.used = c.clock
			c.st.Hits++
			local = e.local + (addr - e.start)
			c.mu.Unlock()
			return local, false, nil
		}
	}
	c.st.Misses++
	c.st.Attaches++
	c.mu.Unlock()
	// Attach outside the lock.
	at, err := c.dev.Attach(apid, start, int(end-start))
	if err != nil {
		return 0, false, fmt.Errorf("attach xpmem segment of rank %d: %w", peer, err)
	}
	local = at + (addr - start)
	if c.max == 0 {
		return local, true, nil
	}
	var dead []uintptr
	c.mu.Lock()
	if len(c.table) >= c.max {
		lru := 0
		for i := range c.table {
			if c.table[i].used < c.table[lru].used {
				lru = i
			}
		}
		dead = append(dead, c.table[lru].local)
		c.table = slices.Delete(c.table, lru, lru+1)
		c.st.Evictions++
	}
	if len(c.table) == cap(c.table) {
		if err := c.growLocked(); err != nil {
			c.mu.Unlock()
			c.detachAll(append(dead, at))
			return 0, false, err
		}
	}
	c.clock++
	c.table = append(c.table, entry{peer: peer, start: start, end: end, local: at, used: c.clock})
	c.st.Entries = len(c.table)
	c.mu.Unlock()
	c.detachAll(dead)
	return local, false, nil
}

// growLocked doubles the table. The safe form grows it on the Go heap; the
// unsafe form calls its allocator with the cache lock held.
func (c *cache) growLocked() error {
	n := max(2*cap(c.table), initialEntries)
	if c.talloc == nil {
		c.table = append(make([]entry, 0, n), c.table...)
	} else {
		// DELIBERATELY UNSAFE (hazard H1): freeing the old table may purge
		// it; the purge runs the release hook on this goroutine, and the
		// unsafe hook takes the cache lock this goroutine holds.
		mem, err := c.talloc.Alloc(n * entrySize)
		if err != nil {
			return fmt.Errorf("grow xpmem attachment table to %d entries: %w", n, err)
		}
		old := c.tableMem
		c.table, c.tableMem = append(entriesIn(mem, n), c.table...), mem
		if old != nil {
			if err := c.talloc.Free(old); err != nil {
				return fmt.Errorf("grow xpmem attachment table: free the old one: %w", err)
			}
		}
	}
	c.st.Grows++
	return nil
}

func entriesIn(mem []byte, n int) []entry {
	return unsafe.Slice((*entry)(unsafe.Pointer(unsafe.SliceData(mem))), n)[:0]
}

// useTable moves the table into a's memory: the unsafe form.
func (c *cache) useTable(a TableAllocator) error {
	mem, err := a.Alloc(initialEntries * entrySize)
	if err != nil {
		return fmt.Errorf("xpmem attachment table: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.talloc, c.tableMem = a, mem
	c.table = append(entriesIn(mem, initialEntries), c.table...)
	return nil
}

// drop detaches every entry of peer overlapping [start, end) (all of the
// peer's when all), counting them as invalidations.
func (c *cache) drop(peer int, spans []span, all bool) {
	c.mu.Lock()
	dead := c.dropLocked(peer, spans, all)
	c.mu.Unlock()
	c.detachAll(dead)
}

func (c *cache) dropLocked(peer int, spans []span, all bool) []uintptr {
	var dead []uintptr
	c.table = slices.DeleteFunc(c.table, func(e entry) bool {
		if e.peer != peer {
			return false
		}
		hit := all
		for _, s := range spans {
			if s.start < e.end && e.start < s.end {
				hit = true
				break
			}
		}
		if hit {
			dead = append(dead, e.local)
			c.st.Invalidations++
		}
		return hit
	})
	c.st.Entries = len(c.table)
	return dead
}

func (c *cache) detachAll(locals []uintptr) {
	for _, l := range locals {
		c.detach(l)
	}
}

func (c *cache) detach(local uintptr) error {
	err := c.dev.Detach(local)
	c.mu.Lock()
	c.st.Detaches++
	c.mu.Unlock()
	return err
}

func (c *cache) stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	st.Posted = c.posted.Load()
	return st
}

// close detaches everything and frees the unsafe form's table.
func (c *cache) close() error {
	c.mu.Lock()
	c.closed = true
	var dead []uintptr
	for _, e := range c.table {
		dead = append(dead, e.local)
	}
	c.table = nil
	mem, a := c.tableMem, c.talloc
	c.tableMem = nil
	c.mu.Unlock()
	var first error
	for _, l := range dead {
		if err := c.detach(l); err != nil && first == nil {
			first = err
		}
	}
	if mem != nil {
		if err := a.Free(mem); err != nil && first == nil {
			first = err
		}
	}
	return first
}

type span struct{ start, end uintptr }

// The notice board: one page of this rank's memory that its peers attach.
// Word 0 counts the notices ever posted; notice k lives in slot k mod
// boardSlots as two words (start, end) from byte 16 on. The poster writes
// the slot, then the count (a release store); a reader loads the count
// (acquire), reads the new slots, and loads the count again: if the poster
// lapped it meanwhile, the reader drops all its entries of that peer.
const (
	boardBytes = 4096
	boardSlots = (boardBytes - 16) / 16
)

type board struct {
	mu   sync.Mutex // the board's own lock: the only one the safe hook takes
	mem  []byte
	addr uintptr
}

func newBoard() (*board, error) {
	mem, err := sys.MapAnon(boardBytes, true)
	if err != nil {
		return nil, fmt.Errorf("xpmem notice board: %w", err)
	}
	return &board{mem: mem, addr: sys.AddressOf(mem)}, nil
}

// post records that [addr, addr+n) is being released.
func (b *board) post(addr uintptr, n int) {
	b.mu.Lock()
	k := sys.LoadUint64At(b.addr)
	slot := b.addr + 16 + uintptr(k%boardSlots)*16
	sys.StoreUint64At(slot, uint64(addr))
	sys.StoreUint64At(slot+8, uint64(addr)+uint64(n))
	sys.StoreUint64At(b.addr, k+1)
	b.mu.Unlock()
}

func (b *board) close() error { return sys.Unmap(b.mem) }

// peerBoard is this rank's view of a peer's board.
type peerBoard struct {
	remote, local uintptr // the board in the peer, and its attachment here
	seen          uint64  // notices read so far
	slots         []byte  // scratch for reading the peer's slots
}

// read returns the notices posted since the last read, or all=true when
// some were overwritten before they were read.
func (p *peerBoard) read(dev device, pid int) (spans []span, all bool, err error) {
	k, err := dev.Load64(pid, p.local, p.remote)
	if err != nil || k == p.seen {
		return nil, false, err
	}
	if k-p.seen >= boardSlots {
		p.seen = k
		return nil, true, nil
	}
	if p.slots == nil {
		p.slots = make([]byte, boardBytes-16)
	}
	if err := dev.Move(pid, p.local+16, p.remote+16, p.slots, true); err != nil {
		return nil, false, err
	}
	for i := p.seen; i < k; i++ {
		o := (i % boardSlots) * 16
		s := *(*uint64)(unsafe.Pointer(&p.slots[o]))
		e := *(*uint64)(unsafe.Pointer(&p.slots[o+8]))
		spans = append(spans, span{uintptr(s), uintptr(e)})
	}
	again, err := dev.Load64(pid, p.local, p.remote)
	if err != nil {
		return nil, false, err
	}
	start := p.seen
	p.seen = k
	if again-start >= boardSlots { // a poster writes slot again%boardSlots before it counts it
		return nil, true, nil
	}
	return spans, false, nil
}
