// Package tcp is the portable inter-node baseline transport: ordered
// messages between ranks over TCP sockets, eager and rendezvous, with tuned
// socket options. Its ranks may run on one host (gotune's launcher) or on
// several (a cluster launcher): it needs only the job's allgather.
//
// # Connection setup and the job token
//
// Every rank listens on tcp.addr. Its default, auto, is the rank's address
// on the job's bootstrap network with a port the kernel picks
// (transports.Env.Addr, set when the job spans hosts), else 127.0.0.1:0.
// The ranks then exchange the addresses they got through the job's
// allgather (transports.Env.AllGather; a wildcard listener, 0.0.0.0 or ::,
// publishes the bootstrap address, or loopback on one host). A rank that
// cannot listen takes part in the allgather with its reason, so its peers
// fail at once naming it. Each rank then connects to every
// higher rank, tcp.conns connections a pair, and accepts the lower ranks'.
// Every connection opens with a handshake: magic, rank, connection index,
// connections per pair, job size and the job token (transports.Env.Token,
// the launcher's per-job secret). The acceptor compares the token in
// constant time and checks that the rest fits; a connection that fails is
// closed without an answer and logged on stderr with the peer's address
// ("refused a connection from 10.0.0.2:41234: wrong job token"). The
// listener stays open for the transport's life and refuses everything once
// setup is over. New fails when Env.Token or Env.AllGather is missing. The
// transport needs no shared segment.
//
// # Protocol
//
// Every connection is a stream of frames: a 24-byte header (kind, sequence
// number, length, offset) and, for some kinds, a payload. Messages between a
// pair are matched in the order they were sent: the n-th message a rank
// sends to a peer matches the n-th receive the peer posts for it. The
// requests, their matching and Wait are transports/msgengine's, shared
// with the ib transport; this package frames and moves the messages.
//
//   - Eager (length ≤ tcp.eager): header and payload in one sendmsg on the
//     pair's first connection. A receive already posted takes the payload
//     straight into its buffer; otherwise it lands in a reusable eager
//     buffer until the receive comes (the unexpected queue).
//   - Rendezvous (above tcp.eager): the sender writes a request to send
//     (RTS); the receiver answers clear to send (CTS) with the bytes it takes
//     once its receive is posted; the sender then writes the payload from
//     the user's buffer in data frames, striped over the pair's connections
//     (at least 64 KiB a stripe), and the receiver reads each stripe
//     straight into the receive buffer at its offset: no intermediate copy
//     on either side. Stripes of tcp.zerocopy bytes or more go with
//     MSG_ZEROCOPY, and the send completes only when the kernel has
//     released the pages (error-queue completions). Where the kernel refuses
//     SO_ZEROCOPY, the transport copies and says so once on stderr.
//   - A message longer than its receive buffer fills the buffer and the
//     receive fails with transports.ErrTruncated; the rest is dropped and the
//     pair stays in step.
//
// # Progress
//
// There is no progress thread and no goroutine per connection: the rank's
// measuring goroutine drives everything inside Isend, Irecv and Wait with
// non-blocking reads and writes on the raw descriptors (internal/sys). A
// goroutine per connection would put a scheduler wake-up (and a channel
// hand-off) on every message's path and make the payload land in a buffer
// the reader chose rather than the receive buffer. The connections are
// detached from the Go runtime's netpoller once set up (duplicated, the
// net.Conn closed): left registered there, every segment and ACK woke a
// runtime thread, which on two cores took the CPU from the ranks. The
// non-blocking calls bypass the runtime's syscall state (RawSyscall), so
// sysmon never hands the rank's P to another thread around them; only the
// sleeping poll(2) enters it.
//
// Reads: a read that returns less than it asked for has drained the
// socket; the next is tried only once poll(2) with a zero timeout, over
// all connections at once, says there is more (poll takes no socket lock,
// a read that finds nothing does). Writes are simply retried. Small frames
// are read several at a time into a 64 KiB staging area per connection;
// the rest of a payload is read straight into its destination with what
// follows it into the stage (one recvmsg with two buffers, as Open MPI's
// btl tcp reads into a fragment and its endpoint cache). Wait spins for
// 50 µs, then sleeps in poll(2) on every connection, so a rank that waits
// long costs no CPU. Requests, frames, arrivals and eager buffers are
// recycled, so the steady state allocates nothing per message. A
// Transport is driven by one goroutine at a time; a request must not be
// used after the Wait that completed it returns. docs/transports.md (tcp) has the
// measurements behind these choices.
//
// # Errors
//
// Errors name the operation, the peer's rank and address and the
// connection ("rendezvous send of 8388608 bytes to rank 1: tcp: rank 0
// connection 0 with rank 1 (127.0.0.1:33971): connection reset by peer"). A
// peer that exits fails every operation under way with it, never a hang: its
// end of stream or reset reaches the poll. Close sends end of stream on
// every connection and reads the peer's before closing, so data in flight
// is never reset.
//
// # Options
//
// tcp.eager, tcp.sndbuf, tcp.rcvbuf (0: the kernel's defaults and
// autotuning; SO_RCVBUF is set on the listener before listen so the window
// scale fits), tcp.nodelay, tcp.conns, tcp.busypoll (SO_BUSY_POLL; a refusal
// fails New with an ErrNotSupported error), tcp.zerocopy and tcp.addr: see
// Options and docs/options.md.
package tcp
