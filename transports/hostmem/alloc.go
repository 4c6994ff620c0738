package hostmem

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/gotune/gotune/internal/sys"
)

// MaxClass is the largest size class (and so the largest buffer).
const MaxClass = 1 << 40

// ClassSize is the size class of an n-byte request: the smallest power of
// two that is at least n and at least the page size.
func ClassSize(n int) (int, error) {
	if n < 0 || n > MaxClass {
		return 0, fmt.Errorf("size class of %d bytes: out of range [0, %d]", n, MaxClass)
	}
	if n <= sys.PageSize {
		return sys.PageSize, nil
	}
	return 1 << bits.Len(uint(n-1)), nil
}

func classIndex(size int) int { return bits.Len(uint(size)) - bits.Len(uint(sys.PageSize)) }

// Stats count what the allocator did, for tests and reports.
type Stats struct {
	Allocs, Frees int64
	CacheHits     int64 // allocations served from the cache
	Maps          int64 // fresh mappings (cache misses)
	THPFallbacks  int64 // huge-page mappings that fell back to base pages
	Purges        int64 // cached buffers handed back with MADV_DONTNEED
	PurgedBytes   int64
	Unmaps        int64 // buffers unmapped (cache full, or Close)
	UnmappedBytes int64
	MappedBytes   int64 // currently mapped, live and cached, by class size
	LiveBytes     int64 // handed out and not yet freed
	CachedBytes   int64 // in the cache (purged or not)
	// ResidentBytes is the cached bytes not purged since their last use:
	// what the cache keeps out of the kernel's hands, at most (pages never
	// touched are not resident either). Allocator.Resident asks the kernel.
	ResidentBytes int64
}

type blockState uint8

const (
	stateLive      blockState = iota
	stateCached               // on a free list
	stateReleasing            // being purged or unmapped, outside the lock
)

// block is one mapping of one size class; its bookkeeping lives on the Go
// heap, its memory outside it.
type block struct {
	mem     []byte // the whole mapping: len = cap = class size
	state   blockState
	purged  bool   // pages handed back since the last use
	gen     uint64 // bumped whenever the block enters the cache
	inClass link   // on its class's free list
	byAge   link   // on the cache's age list
}

func (b *block) addr() uintptr { return sys.AddressOf(b.mem) }

type link struct{ prev, next *block }

// list is an intrusive doubly linked list of cached blocks through the
// links at returns. Free lists are used LIFO: the most recently freed
// (warmest) block of a class is reused first, so the oldest ones age into
// purges; the age list's tail is the least recently freed block of all,
// the first evicted when the cache is full.
type list struct {
	head, tail *block
	at         func(*block) *link
}

func classList() list { return list{at: func(b *block) *link { return &b.inClass }} }
func ageList() list   { return list{at: func(b *block) *link { return &b.byAge }} }

func (l *list) pushFront(b *block) {
	*l.at(b) = link{next: l.head}
	if l.head != nil {
		l.at(l.head).prev = b
	} else {
		l.tail = b
	}
	l.head = b
}

func (l *list) remove(b *block) {
	k := l.at(b)
	if k.prev != nil {
		l.at(k.prev).next = k.next
	} else {
		l.head = k.next
	}
	if k.next != nil {
		l.at(k.next).prev = k.prev
	} else {
		l.tail = k.prev
	}
	*k = link{}
}

type pendingPurge struct {
	b   *block
	due uint64 // the free count at which the purge is due
	gen uint64 // the block's generation when it was queued
}

type hook struct{ fn func(addr uintptr, n int) }

// Allocator hands out message buffers from size-classed mappings outside
// the Go heap. It is safe for concurrent use. It never holds its own lock
// while it maps, purges or unmaps memory or runs a release hook, so a hook
// may call back into it.
type Allocator struct {
	cfg Config

	mu      sync.Mutex
	closed  bool
	lists   []list // free lists, by class index
	age     list   // every cached block, most recently freed first
	live    map[uintptr]*block
	pending []pendingPurge // Delayed: in due order
	frees   uint64
	hooks   []*hook // copied on write: a snapshot stays valid outside the lock
	st      Stats
}

// New returns an allocator with configuration c.
func New(c Config) (*Allocator, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("host allocator: %w", err)
	}
	a := &Allocator{cfg: c, lists: make([]list, classIndex(MaxClass)+1), age: ageList(), live: map[uintptr]*block{}}
	for i := range a.lists {
		a.lists[i] = classList()
	}
	return a, nil
}

// Config returns the allocator's configuration.
func (a *Allocator) Config() Config { return a.cfg }

// Stats returns a snapshot of the counters.
func (a *Allocator) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st
}

// OnRelease registers fn to run, synchronously and before the kernel sees
// the call, whenever the allocator purges or unmaps [addr, addr+n). It runs
// on the goroutine that freed (or closed), without the allocator's lock.
// The returned function unregisters it.
func (a *Allocator) OnRelease(fn func(addr uintptr, n int)) (remove func()) {
	h := &hook{fn: fn}
	a.mu.Lock()
	a.hooks = append(slices.Clip(a.hooks), h)
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		a.hooks = slices.DeleteFunc(slices.Clone(a.hooks), func(x *hook) bool { return x == h })
		a.mu.Unlock()
	}
}

// Alloc returns an n-byte buffer (capacity: its size class), page-aligned.
// A fresh mapping is zero-filled and not yet faulted in (with THP, huge
// classes are); a buffer from the cache holds whatever it held, or zeros if
// it was purged.
func (a *Allocator) Alloc(n int) ([]byte, error) {
	size, err := ClassSize(n)
	if err != nil {
		return nil, fmt.Errorf("host allocator: alloc: %w", err)
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, errors.New("host allocator: alloc after close")
	}
	a.st.Allocs++
	if b := a.lists[classIndex(size)].head; b != nil {
		a.st.CacheHits++
		a.uncacheLocked(b)
		a.takeLocked(b)
		a.mu.Unlock()
		return b.mem[:n], nil
	}
	a.mu.Unlock()
	mem, fellBack, err := a.mapClass(size)
	if err != nil {
		return nil, err
	}
	b := &block{mem: mem}
	a.mu.Lock()
	a.st.Maps++
	a.st.MappedBytes += int64(size)
	if fellBack {
		a.st.THPFallbacks++
	}
	a.takeLocked(b)
	a.mu.Unlock()
	return mem[:n], nil
}

func (a *Allocator) takeLocked(b *block) {
	b.state = stateLive
	a.live[b.addr()] = b
	a.st.LiveBytes += int64(len(b.mem))
}

// mapClass maps one buffer of a size class, with the huge-page policy.
func (a *Allocator) mapClass(size int) (mem []byte, fellBack bool, err error) {
	if a.cfg.THP && size >= sys.HugePage {
		if mem, err := sys.MapAnonHuge(size); err == nil {
			return mem[:size:size], false, nil
		}
		fellBack = true // no THP here (madvise refused): base pages
	}
	mem, err = sys.MapAnon(size, false)
	if err != nil {
		return nil, false, fmt.Errorf("host allocator: map %d-byte class: %w", size, err)
	}
	mem = mem[:size:size]
	if !a.cfg.THP {
		if err := sys.Madvise(mem, sys.AdviseNoHugePage); err != nil && !errors.Is(err, sys.ErrNotSupported) {
			sys.Unmap(mem)
			return nil, false, fmt.Errorf("host allocator: map %d-byte class: %w", size, err)
		}
	}
	return mem, fellBack, nil
}

// Free gives a buffer from Alloc back (b must start where Alloc's did).
// Depending on the cache's room and the purge policy, the buffer is cached,
// purged, or unmapped; a delayed purge that falls due is carried out too.
// The release hooks run before each purge or unmap.
func (a *Allocator) Free(b []byte) error {
	if cap(b) == 0 {
		return errors.New("host allocator: free of an empty slice")
	}
	addr := sys.AddressOf(b)
	a.mu.Lock()
	blk := a.live[addr]
	if blk == nil {
		a.mu.Unlock()
		return fmt.Errorf("host allocator: free %#x: not a live buffer of this allocator (freed twice?)", addr)
	}
	delete(a.live, addr)
	size := int64(len(blk.mem))
	a.st.Frees++
	a.st.LiveBytes -= size
	a.frees++
	var purge, unmap []*block
	if !a.closed && size <= a.cfg.CacheBytes {
		// Make room by evicting the least recently freed buffers.
		for a.st.CachedBytes+size > a.cfg.CacheBytes && a.age.tail != nil {
			old := a.age.tail
			a.uncacheLocked(old)
			old.state = stateReleasing
			unmap = append(unmap, old)
		}
	}
	if !a.closed && a.st.CachedBytes+size <= a.cfg.CacheBytes {
		a.st.CachedBytes += size
		blk.gen++
		if a.cfg.Purge == Immediate {
			blk.state = stateReleasing
			purge = append(purge, blk)
		} else {
			a.cacheLocked(blk, false)
			if a.cfg.Purge == Delayed {
				a.pending = append(a.pending, pendingPurge{b: blk, due: a.frees + uint64(a.cfg.DelayFrees), gen: blk.gen})
			}
		}
	} else {
		blk.state = stateReleasing
		unmap = append(unmap, blk)
	}
	purge = a.duePurgesLocked(purge)
	hooks := a.hooks
	a.mu.Unlock()
	return a.release(purge, unmap, hooks)
}

// cacheLocked puts a block on its free list and at the young end of the
// age list (its bytes are already counted in CachedBytes).
func (a *Allocator) cacheLocked(b *block, purged bool) {
	b.state, b.purged = stateCached, purged
	if !purged {
		a.st.ResidentBytes += int64(len(b.mem))
	}
	a.lists[classIndex(len(b.mem))].pushFront(b)
	a.age.pushFront(b)
}

// uncacheLocked takes a cached block off the lists and out of the counts.
func (a *Allocator) uncacheLocked(b *block) {
	a.lists[classIndex(len(b.mem))].remove(b)
	a.age.remove(b)
	a.st.CachedBytes -= int64(len(b.mem))
	if !b.purged {
		a.st.ResidentBytes -= int64(len(b.mem))
	}
}

// duePurgesLocked takes the delayed purges that are due off the free lists
// (a block reused since it was queued is skipped: it is not idle).
func (a *Allocator) duePurgesLocked(purge []*block) []*block {
	k := 0
	for ; k < len(a.pending) && a.pending[k].due <= a.frees; k++ {
		p := a.pending[k]
		if p.b.state != stateCached || p.b.purged || p.b.gen != p.gen {
			continue
		}
		a.uncacheLocked(p.b)
		a.st.CachedBytes += int64(len(p.b.mem)) // still reserved: it comes back, purged
		p.b.state = stateReleasing
		purge = append(purge, p.b)
	}
	if k > 0 {
		a.pending = slices.Delete(a.pending, 0, k)
	}
	return purge
}

// release purges or unmaps blocks taken off every list, outside the lock:
// hooks first, then the system call.
func (a *Allocator) release(purge, unmap []*block, hooks []*hook) error {
	var errs []error
	for _, b := range purge {
		runHooks(hooks, b)
		err := sys.Madvise(b.mem, sys.AdviseDontNeed)
		a.mu.Lock()
		if err != nil {
			errs = append(errs, fmt.Errorf("host allocator: purge: %w", err))
		} else {
			a.st.Purges++
			a.st.PurgedBytes += int64(len(b.mem))
		}
		if a.closed { // closed meanwhile: nothing may stay mapped
			a.st.CachedBytes -= int64(len(b.mem))
			a.mu.Unlock()
			errs = append(errs, a.unmap(b, hooks))
			continue
		}
		a.cacheLocked(b, err == nil)
		a.mu.Unlock()
	}
	for _, b := range unmap {
		errs = append(errs, a.unmap(b, hooks))
	}
	return errors.Join(errs...)
}

func (a *Allocator) unmap(b *block, hooks []*hook) error {
	runHooks(hooks, b)
	err := sys.Unmap(b.mem)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		return fmt.Errorf("host allocator: %w", err)
	}
	a.st.Unmaps++
	a.st.UnmappedBytes += int64(len(b.mem))
	a.st.MappedBytes -= int64(len(b.mem))
	return nil
}

func runHooks(hooks []*hook, b *block) {
	for _, h := range hooks {
		h.fn(b.addr(), len(b.mem))
	}
}

// Close unmaps every cached buffer (running the hooks). Buffers still
// allocated stay valid; freeing one later unmaps it.
func (a *Allocator) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	var drop []*block
	for b := a.age.tail; b != nil; b = a.age.tail {
		a.uncacheLocked(b)
		b.state = stateReleasing
		drop = append(drop, b)
	}
	a.pending = nil
	hooks := a.hooks
	a.mu.Unlock()
	var errs []error
	for _, b := range drop {
		errs = append(errs, a.unmap(b, hooks))
	}
	return errors.Join(errs...)
}

// Resident asks the kernel (mincore) how many bytes of the allocator's
// mappings, live and cached, are resident. It is meant for tests and
// reports while no other goroutine frees.
func (a *Allocator) Resident() (int64, error) {
	a.mu.Lock()
	var spans [][]byte
	for _, b := range a.live {
		spans = append(spans, b.mem)
	}
	for b := a.age.head; b != nil; b = b.byAge.next {
		spans = append(spans, b.mem)
	}
	a.mu.Unlock()
	var total int64
	for _, m := range spans {
		n, err := sys.Resident(m)
		if err != nil {
			return 0, fmt.Errorf("host allocator: resident: %w", err)
		}
		total += int64(n)
	}
	return total, nil
}
