package sm

// Matching receives with messages, in order per peer: a posted receive
// takes the oldest early arrival or waits in recvq; a message that arrives
// first waits in the unexpected queue; pipelined messages still arriving
// are found by number; await publishes the count of posted receives that
// the sender reads.

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gotune/gotune/internal/sys"
)

// unexpected is a message that arrived before its receive was posted.
type unexpected struct {
	data     []byte // eager or pipelined payload (heap copy)
	got      int    // bytes of data arrived so far
	complete bool
	rts      bool  // a rendezvous request: data is nil
	place    Place // where the rendezvous sender's buffer lives
	size     int
	addr     uintptr
	id       uint64
	handle   uint64   // the rendezvous sender's handle (Exporter)
	req      *request // receive matched while still arriving
}

// newUnexpected returns a cleared entry whose data holds size bytes, reusing
// released entries and their buffers: with the collector off in ranks, a
// fresh allocation per early message would grow the heap without bound.
func (e *Endpoint) newUnexpected(size int) *unexpected {
	u := reuse(&e.unexpFree)
	*u = unexpected{data: u.data[:0]}
	if cap(u.data) < size {
		u.data = make([]byte, size)
	}
	u.data, u.size = u.data[:size], size
	return u
}

func (e *Endpoint) freeUnexpected(u *unexpected) { e.unexpFree = append(e.unexpFree, u) }

// incoming is a pipelined message whose fragments are still arriving.
type incoming struct {
	id   uint64 // the message's number on its channel
	size int
	req  *request    // destination: a posted receive, or
	unx  *unexpected // an unexpected-queue entry
}

// postRecv matches r with the oldest early arrival from p, or queues it.
// It does not drain the channel: a window of receives is posted before
// its messages are taken from the ring. Why: draining here parked every
// message that arrived while the window was still being posted, a second
// copy (docs/transports.md, sm: progress and matching). A parked
// request-to-send whose copy would run here, synchronously, is left to the
// next progress pass (startMatched).
func (e *Endpoint) postRecv(p *peer, r *request) {
	e.countLarge(r)
	e.await(p)
	if p.unexp.Len() == 0 {
		p.recvq.Push(r)
		return
	}
	u := p.unexp.Pop()
	switch {
	case u.rts && e.events == nil:
		e.matched = append(e.matched, matchedRTS{p: p, r: r, u: u})
	case u.rts:
		e.startRendezvousRecv(p, r, u.size, u.addr, u.id, u.place, u.handle)
		e.freeUnexpected(u)
	case u.complete:
		var n int
		if r.device() {
			n = e.getDevice(r, r.buf, u.data)
		} else {
			n = copy(r.buf, u.data)
		}
		r.complete(n, truncated(u.size, len(r.buf)))
		e.freeUnexpected(u)
	default: // still arriving: finish (and free) when the last fragment lands
		u.req = r
	}
}

// matchedRTS is a receive matched with a parked request-to-send, its copy
// not yet started.
type matchedRTS struct {
	p *peer
	r *request
	u *unexpected
}

// startMatched starts the rendezvous of every receive postRecv matched
// with a parked request-to-send, in the order they were matched, and
// reports whether there were any. Why later than the post: a synchronous
// copy run inside the receive's post delays the sends the application
// posts next, and a peer that waits for one of those before it copies its
// own part serialises the two copies of an exchange (an alltoall step
// then takes two copies' time, docs/performance.md, 16 ranks).
func (e *Endpoint) startMatched() bool {
	if len(e.matched) == 0 {
		return false
	}
	for i, m := range e.matched {
		e.matched[i] = matchedRTS{}
		e.startRendezvousRecv(m.p, m.r, m.u.size, m.u.addr, m.u.id, m.u.place, m.u.handle)
		e.freeUnexpected(m.u)
	}
	e.matched = e.matched[:0]
	return true
}

// await counts one more receive for p's messages and tells the sender.
func (e *Endpoint) await(p *peer) {
	p.awaited++
	sys.StoreRelease64(p.rx.awaited, p.awaited)
}

// startsMessage says whether a cell of this kind and body from p is the
// first of a message, one that matching pairs with a posted receive.
func startsMessage(p *peer, kind uint8, body []byte) bool {
	return kind == kindEager || kind == kindRTS || kind == kindFrag && binary.LittleEndian.Uint64(body[8:]) == p.nextIn
}

// parkEarly queues a message that arrived before its receive.
func (e *Endpoint) parkEarly(p *peer, u *unexpected) {
	p.unexp.Push(u)
	e.early++
}

// matchNew pops the posted receive for a newly arriving message, or nil.
func (e *Endpoint) matchNew(p *peer) *request {
	if p.recvq.Len() == 0 {
		return nil
	}
	return p.recvq.Pop()
}

// arrivingIndex finds pipelined message id among p.arriving, opening
// (and matching) it if it is new, and returns its index.
func (e *Endpoint) arrivingIndex(p *peer, size int, id uint64) int {
	if id == p.nextIn {
		p.nextIn++
		in := incoming{id: id, size: size}
		if r := e.matchNew(p); r != nil {
			in.req = r
		} else {
			in.unx = e.newUnexpected(size)
			e.parkEarly(p, in.unx)
		}
		p.arriving = append(p.arriving, in)
		return len(p.arriving) - 1
	}
	if i := p.inTurn; i < len(p.arriving) && p.arriving[i].id == id {
		return i
	}
	for i := range p.arriving {
		if p.arriving[i].id == id {
			return i
		}
	}
	panic(fmt.Sprintf("%s: corrupt channel %d->%d: fragment of message %d, which is not arriving (next new: %d)", e.name, p.rank, e.rank, id, p.nextIn))
}

// arrived closes p.arriving[i], whose last fragment has landed.
func (e *Endpoint) arrived(p *peer, i int) {
	p.arriving = slices.Delete(p.arriving, i, i+1)
	p.inTurn = i
}
