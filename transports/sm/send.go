package sm

// The send path: Send and Isend, and moving queued sends into a peer's
// ring (control cells, eager cells, pipelined fragments taking turns,
// rendezvous requests).

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

// Send blocks until buf may be reused.
func (e *Endpoint) Send(to int, buf []byte) error {
	e.startProgressFor(len(buf))
	if e.async {
		e.enter()
		err := e.send(to, buf)
		e.exit()
		return err
	}
	return e.send(to, buf)
}

func (e *Endpoint) send(to int, buf []byte) error {
	p := e.peerOf(to)
	if p == nil {
		return e.noPeer(to)
	}
	e.closePacks()
	// Fast path: nothing queued ahead, and the pair's fast box free for
	// the smallest messages (box.go) or room for an eager cell.
	if e.mem == nil && len(buf) <= e.params.EagerLimit && p.sendq.Len() == 0 && len(p.streams) == 0 && p.ctrl.Len() == 0 {
		if len(buf) <= BoxPayload && p.box.turn() {
			p.box.put(buf, p.tx.head.n)
			p.msgOut++
			return nil
		}
		if p.tx.cellFree() {
			p.tx.putEager(buf)
			p.tx.publish(kindEager, len(buf))
			p.msgOut++
			return nil
		}
	}
	r := e.isend(p, buf)
	e.waitOne(r)
	e.flushCtrl()
	err := r.err
	e.recycle(r)
	return err
}

// Isend starts a send.
func (e *Endpoint) Isend(to int, buf []byte) (transports.Request, error) {
	p, err := e.peer(to)
	if err != nil {
		return nil, err
	}
	e.startProgressFor(len(buf))
	if !e.async {
		return e.isendPacking(p, buf), nil
	}
	e.enter() // no defer: it costs more than the hand-off on this path
	r := e.isendPacking(p, buf)
	e.exit()
	return r, nil
}

// isendPacking is isend, packing buf where it may (pack.go).
func (e *Endpoint) isendPacking(p *peer, buf []byte) *request {
	if e.packable(p, buf) && e.packSend(p, buf) {
		r := e.newRequest(p, buf, true)
		r.complete(len(buf), nil)
		return r
	}
	return e.isend(p, buf)
}

func (e *Endpoint) isend(p *peer, buf []byte) *request {
	e.closePacks()
	r := e.newRequest(p, buf, true)
	if e.mem != nil && !e.classify(r) {
		return r
	}
	e.postSend(p, r)
	e.feedPushes(p, r)
	return r
}

// postSend queues send r (fresh or a started persistent one) and moves
// what the ring takes now, except that a pipelined send moves only its
// first fragment: the rest moves while the application waits, in turns
// with the sends posted after it (Params.Streams). Why: moving all the
// ring takes at the post, with a receiver that keeps up, moves each
// message whole, sweeping source and destination once per message instead
// of a fragment's worth of each in a row from the caches
// (docs/transports.md, sm: streams).
func (e *Endpoint) postSend(p *peer, r *request) {
	e.countLarge(r)
	r.proto = e.protoFor(p, r)
	r.msg = p.msgOut
	p.msgOut++
	p.sendq.Push(r)
	e.pushSends(p, true)
}

// progressSend moves what p's ring takes now: queued control cells, then
// fallback fragments, then queued sends in order.
func (e *Endpoint) progressSend(p *peer) bool { return e.pushSends(p, false) }

// pushSends is progressSend; posting stops the pipelined sends' turns
// once every one of them has started.
func (e *Endpoint) pushSends(p *peer, posting bool) bool {
	moved := e.closePack(p)
	for p.ctrl.Len() > 0 && p.tx.cellFree() {
		c := p.ctrl.Pop()
		putWords(p.tx.cell(), c.words[:])
		p.tx.publish(c.kind, ctrlPayload)
		moved = true
	}
	if p.ctrl.Len() > 0 {
		return moved
	}
	if p.fallq.Len() > 0 && e.progressFallback(p) {
		moved = true
	}
	for {
		if len(p.streams) > 0 && e.turnStreams(p, posting) {
			moved = true
		}
		// Messages match in the order they start: nothing queued behind a
		// pipelined send goes before its first fragment.
		if n := len(p.streams); n > 0 && p.streams[n-1].off == 0 || p.sendq.Len() == 0 {
			return moved
		}
		r := p.sendq.Front()
		if r.persistent && !r.credit && !e.takeCredit(p, r) {
			return moved // every credit is in flight: wait for a completion
		}
		switch r.proto {
		case protoEager:
			if !p.tx.cellFree() {
				return moved
			}
			if r.device() {
				e.putDevice(r, p.tx.cell(), r.buf)
			} else {
				p.tx.putEager(r.buf)
			}
			p.tx.publish(kindEager, len(r.buf))
			r.complete(len(r.buf), nil)
		case protoPipeline:
			if len(p.streams) >= e.params.Streams {
				return moved
			}
			r.stream = p.nextOut
			p.nextOut++
			p.streams = append(p.streams, r)
		case protoRendezvous:
			if p.noSingle { // refused since this send was queued
				r.proto = protoPipeline
				continue
			}
			if !p.tx.cellFree() {
				return moved
			}
			if e.export != nil && e.single.Pull() && r.handle == 0 {
				h, err := e.export.Export(r.buf, r.place, false)
				switch {
				case err == nil:
					r.handle = h
				case errors.Is(err, sys.ErrNotSupported):
					e.disableSingle(p, fmt.Errorf("%s: export for rank %d refused, copy-in/copy-out from now on: %w", e.single.Name(), p.rank, err))
					r.proto = protoPipeline
					continue
				default:
					r.complete(0, fmt.Errorf("%s: %s: %w", e.name, r.describe(), err))
					p.sendq.Pop()
					moved = true
					continue
				}
			}
			e.nextID++
			r.id, r.waiting = e.nextID, true
			e.rndv[r.id] = r
			putWords(p.tx.cell(), []uint64{uint64(len(r.buf)), uint64(addressOf(r.buf)), r.id, uint64(r.place), r.handle})
			p.tx.publish(kindRTS, ctrlPayload)
		}
		p.sendq.Pop()
		moved = true
	}
}

// turnStreams moves fragments of p's pipelined sends, one each in turn,
// until the ring is full, every one is complete or, when posting, every
// one taking turns has started, and reports whether any moved.
//
// The turns keep the order in which messages start: streams that have not
// started are the newest, at the end, and turn never passes one without
// sending its first fragment.
func (e *Endpoint) turnStreams(p *peer, posting bool) bool {
	moved := false
	for {
		n := e.turning(p)
		if n == 0 || posting && p.streams[n-1].off > 0 {
			return moved
		}
		if p.turn >= n {
			p.turn = 0
		}
		r := p.streams[p.turn]
		if !e.sendFragment(p, r, kindFrag, uint64(len(r.buf)), r.stream) {
			return moved
		}
		moved = true
		if r.off < len(r.buf) {
			p.turn++
			continue
		}
		r.complete(len(r.buf), nil)
		p.streams = slices.Delete(p.streams, p.turn, p.turn+1)
	}
}

// turning is how many of p's streams take turns: the oldest, and after it
// those whose receive the peer has posted. A message no receive awaits
// would be parked in the unexpected queue and copied twice, and a stream
// that took turns with the oldest would park whole while a receiver posts
// its receives one at a time; behind the oldest it waits its turn instead.
// Streams are in message order, so those taking turns are a prefix.
func (e *Endpoint) turning(p *peer) int {
	n := len(p.streams)
	if n <= 1 || p.streams[n-1].msg < p.awaitedSeen {
		return n
	}
	p.awaitedSeen = atomic.LoadUint64(p.tx.awaited)
	i := 1
	for i < n && p.streams[i].msg < p.awaitedSeen {
		i++
	}
	return i
}

// sendFragments moves as much of r as the ring takes now and reports
// whether any moved. r is complete in the ring once r.off reaches
// len(r.buf).
func (e *Endpoint) sendFragments(p *peer, r *request, kind uint8, w0, w1 uint64) bool {
	moved := false
	for r.off < len(r.buf) && e.sendFragment(p, r, kind, w0, w1) {
		moved = true
	}
	return moved
}

// sendFragment moves r's next fragment into p's ring with a descriptor
// cell of this kind and these words, or reports false when the ring has no
// room for it.
func (e *Endpoint) sendFragment(p *peer, r *request, kind uint8, w0, w1 uint64) bool {
	if !p.tx.cellFree() {
		return false
	}
	frag := p.tx.nextFrag(len(r.buf) - r.off)
	if frag == nil {
		return false
	}
	if err := p.tx.ring.faultTo(p.tx.frags, p.tx.pendOff+uint64(len(frag))); err != nil {
		e.Abort(fmt.Errorf("%s: %s: %w", e.name, r.describe(), err))
		return false
	}
	var n int
	if r.device() {
		n = e.putDevice(r, frag, r.buf[r.off:])
	} else {
		n = e.copyIn(p, frag, r.buf[r.off:])
	}
	p.tx.publishFrag(kind, n, w0, w1)
	r.off += n
	return true
}

// copyIn copies one fragment into p's ring.
func (e *Endpoint) copyIn(p *peer, frag, src []byte) int {
	if e.in.guard && !e.in.movsb(min(len(frag), len(src))) {
		return p.spell.copy(frag, src)
	}
	return e.in.copy(frag, src)
}
