// Package hostmem owns host message-buffer memory: the allocator that the
// runtime and the benchmarks take message buffers from (mmap'ed, off the Go
// heap), its memory hooks, and the registration cache that those hooks keep
// honest.
//
// The Allocator rounds requests up to power-of-two size classes starting at
// the page size and keeps freed buffers on per-class free lists in a cache of
// at most Config.CacheBytes; when it is full, the least recently freed
// buffers (of any class) are unmapped to make room. A buffer entering the
// cache is purged (madvise MADV_DONTNEED: pages back to the kernel, mapping
// kept) at once, after Config.DelayFrees further frees, or never, as
// mimalloc's purge delay does; classes of 2 MiB and up can be backed by
// transparent huge pages. Every purge or unmap first runs the release hooks
// (OnRelease), synchronously, as UCX's memory hooks and Open MPI's patcher
// deliver such events to registration caches.
//
// RegCache maps address ranges to registrations (mlock of the range: real
// pinning, as ibv_reg_mr and cuMemHostRegister pin) and drops them when the
// allocator releases their memory. Its safe form never calls the allocator or
// runs a hook while holding its lock: entries live on the Go heap and hook
// invalidations go through a separately locked queue. Its deliberately unsafe
// form (option regcache.entries=hooked) keeps the table in allocator memory,
// grows it under its lock and invalidates synchronously under that lock: with
// an immediate purge that deadlocks (hazard H1; libfabric#10879, ompi#13149).
//
// Options: alloc.cache, alloc.purge, alloc.delay, alloc.thp and
// regcache.entries (see Options).
package hostmem
