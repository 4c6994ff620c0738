package sm

// Requests: their life from post to recycle, and the choice of protocol.

import (
	"fmt"
)

type proto uint8

const (
	protoEager proto = iota
	protoPipeline
	protoRendezvous
	protoFallback // a rendezvous send re-routed through the fragments to receive id
)

type request struct {
	ep      *Endpoint
	peer    *peer
	buf     []byte
	isSend  bool
	proto   proto
	off     int    // bytes moved so far (pipeline, fallback)
	id      uint64 // rendezvous id (own, or the receiver's for protoFallback)
	handle  uint64 // what this side exported for the rendezvous (Exporter; 0: none)
	done    bool
	n       int
	err     error
	waiting bool  // rendezvous control sent, completion pending
	place   Place // where buf lives (Memory's answer; PlaceHost without one): device memory is staged, never touched
	// orphan marks a request failed while the engine's queues may still
	// point at it (abort, peer gone): it is never recycled.
	orphan bool
	// large: counted in the endpoint's largeOpen until complete.
	large bool
	// A split rendezvous receive (RouteSplit): the copies still to finish
	// (its own part, the sender's), the sender's request id and buffer
	// address, and the first failure.
	parts    int8
	peerID   uint64
	remote   uintptr
	splitErr error
	// A send's number among the messages of its channel (msg), and a
	// pipelined send's among the channel's pipelined messages (stream),
	// which its fragment cells carry (Params.Streams).
	msg, stream uint64

	// Persistent requests (SendInit, RecvInit) only.
	persistent bool
	active     bool // started and not yet waited for
	credit     bool // holds one of its channel's persistent credits
	freed      bool
}

// Done reports completion; it does not drive progress. With the progress
// thread it takes the engine for a moment, so that the progress thread's
// writes are visible.
func (r *request) Done() bool {
	if r.ep.async {
		r.ep.acquire()
		d := r.done
		r.ep.exit()
		return d
	}
	return r.done
}

func (r *request) Len() int   { return r.n }
func (r *request) Err() error { return r.err }

func (r *request) complete(n int, err error) {
	r.n, r.err, r.done = n, err, true
	if r.large {
		r.large = false
		r.ep.largeOpen--
	}
}

// describe names the operation for error messages.
func (r *request) describe() string {
	if r.isSend {
		what := "send"
		if r.proto == protoRendezvous || r.proto == protoFallback {
			what = "rendezvous send"
		}
		return fmt.Sprintf("%s of %d bytes to rank %d", what, len(r.buf), r.peer.rank)
	}
	if r.proto == protoRendezvous {
		return fmt.Sprintf("rendezvous receive of %d bytes from rank %d", r.n, r.peer.rank)
	}
	return fmt.Sprintf("receive of up to %d bytes from rank %d", len(r.buf), r.peer.rank)
}

func (e *Endpoint) protoFor(p *peer, r *request) proto {
	n := len(r.buf)
	if r.device() {
		return e.deviceProto(p, n)
	}
	if r.place == PlacePinned && e.pinnedRendezvous(p, n) {
		return protoRendezvous
	}
	switch {
	case n <= e.params.EagerLimit:
		return protoEager
	case e.single != nil && !p.noSingle && e.single.Rendezvous(n):
		return protoRendezvous
	default:
		return protoPipeline
	}
}

// reuse takes the last released object off free, or makes one when free
// is empty; the caller clears it. Requests and early messages are recycled
// so that a rank with the collector off does not grow its heap per message.
func reuse[T any](free *[]*T) *T {
	k := len(*free)
	if k == 0 {
		return new(T)
	}
	x := (*free)[k-1]
	*free = (*free)[:k-1]
	return x
}

func (e *Endpoint) newRequest(p *peer, buf []byte, send bool) *request {
	r := reuse(&e.free)
	*r = request{}
	r.ep, r.peer, r.buf, r.isSend = e, p, buf, send
	return r
}

// recycle makes a finished request reusable, except after an abort or a
// failure that left queues pointing at it, and except persistent requests,
// which live until freed.
func (e *Endpoint) recycle(r *request) {
	if !r.orphan && !r.persistent && e.abort.Load() == nil {
		e.free = append(e.free, r)
	}
}

// countLarge counts r, just posted, in largeOpen if it is above the eager
// limit: the endpoint stays awake until it completes.
func (e *Endpoint) countLarge(r *request) {
	if len(r.buf) > e.params.EagerLimit {
		r.large = true
		e.largeOpen++
	}
}
