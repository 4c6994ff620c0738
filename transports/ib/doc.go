// Package ib is the InfiniBand verbs transport (RoCE included): ordered
// messages between ranks over reliable-connected queue pairs, through
// internal/verbs (libibverbs loaded at run time; without it, or without a
// device, New fails with an ErrNotSupported error saying which).
//
// # Setup
//
// Each rank opens the device ib.dev (default: the first with an active
// port whose GID is on an interface of the rank's network namespace, with
// that address; else the first with an active port: RDMA devices are
// visible from every namespace, a RoCE device moves data only through its
// own netdev), port ib.port and GID index ib.gid (default: the one discovery
// chooses: RoCE v2 with an IPv4 address first, index 0 on InfiniBand),
// creates one RC queue pair per peer on one completion queue, posts
// ib.credits receive slots per peer, and publishes its LID, GID, MTU, PSN,
// the address and key of its control words and its queue pair number for
// every rank through transports.Env.AllGather (so ranks on other hosts
// connect the same way). Each pair connects at the lower of both ends' MTU
// (ib.mtu caps it); a second allgather makes every queue pair ready to
// receive before anyone sends. Ranks must agree on ib.eager and ib.credits
// (checked).
//
// # Protocol
//
// Messages between a pair are matched in the order they were sent. The
// requests, their matching and Wait are transports/msgengine's, shared
// with the tcp transport; this package carries the messages.
//
//   - Eager (length ≤ ib.eager): a 32-byte header and the payload are
//     copied into a registered send slot and sent into one of the peer's
//     pre-posted receive slots; the send completes once posted. A receive
//     already posted takes the payload from the slot; otherwise it is
//     copied out (the unexpected queue) so the slot is reposted at once.
//   - Credit-based flow control: a sender holds one credit per receive slot
//     the peer keeps posted and sends only with a credit; messages wait in
//     order in a per-peer queue otherwise. The receiver returns credits by
//     the count it has reposted, piggybacked on every message it sends and,
//     when half the credits are owed and nothing carries them, by an RDMA
//     write of the count into the sender's control word: returning credits
//     needs no receive slot, so it can never be starved of one.
//   - Rendezvous (above ib.eager), ib.rndv=read (default): the sender
//     registers its buffer and sends a request to send with its address and
//     key; the receiver RDMA-reads the payload straight into its buffer and
//     answers read-done, which completes the send. ib.rndv=write: the
//     request to send carries the length only; the receiver registers its
//     buffer and answers clear-to-send with address and key; the sender
//     RDMA-writes the payload and then sends write-done (ordered behind the
//     write on the queue pair), which completes the receive. The receiver
//     follows the mode of each request to send, so the two may mix.
//   - A message longer than its receive buffer fills the buffer and the
//     receive fails with transports.ErrTruncated; the pair stays in step.
//
// # Registration cache
//
// User buffers are registered on first use and kept, keyed by page range
// (reference-counted while an operation uses them). Memory released to the
// kernel must be invalidated first: Invalidate, or hook it to the
// allocator's release (hostmem.Allocator.OnRelease(t.Invalidate)). The
// cache's lock is never held while registering, deregistering or calling
// anything that may allocate or run a memory hook (hazard H1): Invalidate
// takes only a queue's own lock, and every lookup drains the queue first,
// so a registration of released memory is never used again (one in use is
// deregistered when its operation ends).
//
// # Completion
//
// ib.wait=poll spins on the completion queue inside Wait; ib.wait=event
// spins 50 µs, then arms the queue and sleeps on its completion channel
// (waking every millisecond while a message waits for credits, which come
// back by RDMA write without a completion). One goroutine drives a
// Transport; a request must not be used after the Wait that completed it.
//
// # Errors
//
// A failed completion (retry exceeded: the peer is gone) fails every
// operation with that peer, naming both ranks and the device. Close waits
// up to 2 s for the send queues to drain, then destroys everything.
package ib
