// Package msgengine is the request, matching and progress engine that the
// network transports (tcp, ib) share; it owns everything about an ordered
// point-to-point message that does not depend on what carries it.
//
// It owns:
//
//   - requests (Request, embedded by a transport's own request type): the
//     buffer, direction, sequence number, bytes moved, completion and its
//     error; requests are recycled by Wait;
//   - per-pair matching state (Peer, embedded by a transport's peer): send
//     and receive sequence numbers, receives posted before their message
//     (Posted), messages that came before their receive (Unexpected), the
//     rendezvous receives waiting for their payload (RndvRecv) and the
//     pair's failure;
//   - the posting rules: Isend numbers a send and hands it to the
//     transport's Start; Irecv numbers a receive and matches it with the
//     oldest unexpected arrival (the transport's Match) or posts it; Deliver
//     does the converse for an arrival;
//   - completion: Finish, FinishRecv (a message longer than its buffer
//     fails with transports.ErrTruncated), Fail (every operation with a
//     pair ends with the pair's error, named by OpErr) and the Release hook
//     a transport uses to drop what a request held;
//   - Wait: it drives the transport's Progress until the requests are done,
//     spinning for Spin and then, where the transport can sleep, calling
//     its Sleep;
//   - recycled eager buffers for unexpected messages.
//
// A transport keeps what is its own: the wire (frames, slots, sockets,
// queue pairs), flow control, memory registration and how a rendezvous
// payload moves. Messages between a pair match in the order they were sent:
// the n-th send to a peer matches the peer's n-th receive from this rank.
// An Engine is driven by one goroutine; a request must not be used after
// the Wait that completed it returns.
package msgengine
