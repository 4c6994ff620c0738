// Package sm is the shared-memory copy-in/copy-out transport and the progress
// engine that single-copy transports (CMA today; XPMEM, KNEM, CUDA IPC later)
// plug into.
//
// Every ordered pair of ranks owns one single-producer/single-consumer channel
// in the job's shared segment, a ring of fixed-size cells, and every rank one
// byte ring for the fragments it sends to any peer (so the segment grows with
// n rings, not n²). A cell's first word is its sequence number, written last,
// so a receiver polls one cache line and finds the header and an eager
// payload together. Messages up to the eager limit travel inline in one cell;
// larger ones are pipelined through the fragment ring (one descriptor cell
// per fragment, each fragment packed to a cache line), and pipelined sends
// whose receive the peer has posted take turns, a fragment each (as Open
// MPI's ob1 advances its pending sends); with a single-copy mechanism attached, messages from its
// threshold up use rendezvous: a request-to-send cell, one copy by the
// mechanism, and a completion cell. A mechanism whose copies finish later
// (EventCopy: CUDA IPC) sends the completion cell as soon as the copy is
// queued, naming an event both sides poll (completion.go).
//
// A blocking receive with nothing from its peer ahead of it polls that
// peer's ring alone, flat out, and takes an eager message straight from
// the cell; the sender writes a cell's first line (header, sequence word
// last) after the rest, so the polled line changes hands once (recv.go,
// layout.go). It runs progress passes too when anything else is owed.
// Messages of up to 120 bytes in a ping-pong go through the pair's fast
// box instead, two cache lines the ranks write in turns, so that each
// message moves its lines once (box.go). A window of small Isends is
// packed into one cell, several messages to a line, each visible once its
// Isend returns (pack.go).
//
// A rank waiting for anything (a send blocked on a full ring included) keeps
// draining every incoming channel into posted receives or the unexpected
// queue, so head-to-head sends cannot deadlock on ring space. A message no
// posted receive awaits stays in its ring while anything else moves, and
// posting a receive does not drain: a receive posted in time takes its
// message from the ring with one copy instead of two. A waiter that
// makes no progress checks now and then (a pidfd) whether the peer it waits
// for has exited, and fails with an error naming it instead of hanging.
//
// A single copy the system refuses falls back to the fragments for that
// peer (rendezvous.go); sm.progress=thread adds a progress thread that
// advances the channels while the application computes (async.go);
// persistent requests hold FIFO credits (persistent.go).
//
// The engine by file: endpoint.go (the Endpoint, its peers, New, Close),
// request.go (requests and the choice of protocol), send.go and recv.go
// (the two paths through a ring), box.go (the fast box), match.go (posted receives against
// arrivals), progress.go (progress passes and waiting), cells.go (cell
// kinds and control words), layout.go (Params and the channel layout).
package sm
