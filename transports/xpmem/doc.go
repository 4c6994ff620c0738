// Package xpmem is the XPMEM single-copy transport: the sm engine's
// rendezvous protocol with the payload copied through an XPMEM attachment
// of the peer's memory (the receiver reads, the default; xpmem.mode=push:
// the sender writes). Messages up to the eager limit travel inline through
// the sm FIFO, as with cma.
//
// At setup every rank exports its whole address space (one segment,
// xpmem_make from 0 over XPMEM_MAXADDR_SIZE, mode 0600) and a notice board
// page, gets access to every peer's segment and attaches every peer's
// board; the segment ids and board addresses go round through the job's
// AllGather. A rendezvous copy attaches the peer's range rounded out to
// xpmem.align and keeps the attachment in a cache keyed by peer segment and
// address range (xpmem.cache entries, least recently used evicted).
//
// Invalidation: a rank's allocator release hook (Invalidate; see
// transports.Invalidator) posts the released range on the rank's own
// notice board under the board's lock only; a peer reads the board before
// each copy from that rank and detaches every cached attachment the range
// overlaps. The cache's lock is never held across an attach, a detach, an
// allocation or a hook (hazard H1). xpmem.hook=lock is the deliberately
// unsafe form (the hook takes the cache lock, and the cache grows its table
// with the allocator under it) for probe H1's xpmem variant.
//
// The device is /dev/xpmem (xpmem.device), version-checked against the
// 2.6.x ABI of internal/sys; without it New fails with an error matching
// transports.ErrNotSupported that says why. xpmem.device=fake is a stand-in
// for tests on machines without the module: the same setup, cache,
// notices and protocol, with each copy made by process_vm_readv/writev
// instead of through a mapping.
package xpmem
