// Package regcache owns the interval registration cache that the transports
// share: a table of registered (pinned, registered with a NIC, attached)
// address ranges, each with its caller's payload, looked up by a covering
// range and dropped when the memory under it is released.
//
// A Cache does no registering itself: its caller registers a range on a
// miss, inserts it, and says through Config how to deregister (Release),
// what a new entry does to those it overlaps (Overlap), how many entries
// to keep (Limit, least recently used evicted first), and whether
// invalidations are honoured at all (KeepStale, the deliberately unsafe
// form that keeps a stale registration after its memory is reused).
//
// Lock discipline (hazard H1): the cache lock is never held while the
// caller registers or while Release or Absorb runs; only the functions
// given to UseTable and Locked run under it. Queue, the form for an
// allocator's release hook, takes only the queue's own lock; the queue is
// applied before every lookup. UseTable and Locked exist for the probes'
// unsafe forms, which allocate a table and take the cache lock from a
// hook on purpose.
package regcache
