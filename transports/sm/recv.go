package sm

// The receive path: Recv and Irecv, and consuming a peer's ring cell by
// cell (eager payloads, fragments, rendezvous and control cells).

import (
	"encoding/binary"
	"fmt"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

// Recv blocks until a message from peer has arrived in buf.
func (e *Endpoint) Recv(from int, buf []byte) (int, error) {
	e.startProgressFor(len(buf))
	if e.async {
		e.enter()
		n, err := e.recv(from, buf)
		e.exit()
		return n, err
	}
	return e.recv(from, buf)
}

func (e *Endpoint) recv(from int, buf []byte) (int, error) {
	p := e.peerOf(from)
	if p == nil {
		return 0, e.noPeer(from)
	}
	e.closePacks()
	// Fast path: no receive or early message from p ahead of this one.
	if e.mem == nil && p.recvq.Len() == 0 && p.unexp.Len() == 0 && len(p.arriving) == 0 {
		if n, ok, err := e.recvEager(p, buf); ok {
			return n, err
		}
	}
	r := e.irecv(p, buf)
	e.waitOne(r)
	e.flushCtrl()
	n, err := r.n, r.err
	e.recycle(r)
	return n, err
}

// recvEager waits for p's next message and takes it straight from the
// ring when it is an eager one that fits buf (ok); anything else is left
// for the general path (ok false). It polls p's ring alone for pollSpins,
// a load fence between polls and no pause, then backs off (idle). Unless
// p is the only peer and nothing else is owed (alone), a progress pass
// runs before the tight polls and before every back-off after them, as
// every wait does: what this rank owes moves and other channels keep
// draining (hazard H5). A pass parks p's message when nothing else moves;
// the general path then finds it early.
func (e *Endpoint) recvEager(p *peer, buf []byte) (int, bool, error) {
	alone := e.alone(p)
	lines := touchLines(len(buf), int(p.rx.cellSize))
	for spin := 0; ; spin++ {
		if lines > 0 {
			p.rx.touch(lines)
		}
		h := p.rx.peek()
		if n, ok := p.box.due(p.rx.head.n); ok { // after peek: see box.go
			if n > len(buf) {
				return 0, false, nil
			}
			c := copySmall(buf, p.box.payload()[:n])
			p.box.taken()
			e.await(p)
			return c, true, nil
		}
		if h != nil && h.kind == kindPacked {
			n, ok, fits := e.recvPacked(p, h, buf)
			switch {
			case ok:
				e.await(p)
				return n, true, nil
			case !fits:
				return 0, false, nil
			}
			h = nil // nothing new in the open cell: poll on
		}
		if h != nil {
			if h.kind != kindEager || int(h.length) > len(buf) {
				return 0, false, nil
			}
			n := copy(buf, p.rx.body()[:h.length])
			p.rx.release()
			e.await(p)
			return n, true, nil
		}
		if spin < pollSpins && (alone || spin > 0) {
			sys.PollFence()
			continue
		}
		if !alone && e.progress() && p.unexp.Len() > 0 {
			return 0, false, nil
		}
		if err := e.idle(spin); err != nil {
			return 0, true, err
		}
		if spin&livenessMask == livenessMask && e.peerExited(p) {
			return 0, false, nil // the general path reports it
		}
	}
}

// alone reports whether p's incoming ring is all a wait for p needs to
// watch: p is the only peer and nothing is queued or in flight to it.
func (e *Endpoint) alone(p *peer) bool {
	return len(e.active) == 1 && p.sendq.Len() == 0 && p.ctrl.Len() == 0 && len(p.streams) == 0 &&
		p.fallq.Len() == 0 && len(e.inflight) == 0 && len(e.matched) == 0
}

// Irecv posts a receive.
func (e *Endpoint) Irecv(from int, buf []byte) (transports.Request, error) {
	p, err := e.peer(from)
	if err != nil {
		return nil, err
	}
	e.startProgressFor(len(buf))
	if !e.async {
		return e.irecv(p, buf), nil
	}
	e.enter()
	r := e.irecv(p, buf)
	e.exit()
	return r, nil
}

func (e *Endpoint) irecv(p *peer, buf []byte) *request {
	e.closePacks()
	r := e.newRequest(p, buf, false)
	if e.mem != nil && !e.classify(r) {
		return r
	}
	e.postRecv(p, r)
	e.feedPushes(p, r)
	return r
}

func truncated(size, capacity int) error {
	if size > capacity {
		return fmt.Errorf("%w: %d-byte message into %d-byte buffer", transports.ErrTruncated, size, capacity)
	}
	return nil
}

// progressRecv consumes p's published cells. A cell that starts a
// message no posted receive awaits ends the pass unless park is set
// (progress says when).
func (e *Endpoint) progressRecv(p *peer, park bool) bool {
	moved := false
	for {
		h := p.rx.peek()
		if n, ok := p.box.due(p.rx.head.n); ok { // after peek: see box.go
			if !park && p.recvq.Len() == 0 {
				e.held = true
				return moved
			}
			e.deliverEager(p, p.box.payload()[:n])
			p.box.taken()
			moved = true
			continue
		}
		if h == nil {
			return moved
		}
		if h.kind == kindPacked {
			took, state := e.takePacked(p, h, park)
			moved = moved || took
			switch state {
			case packHeld:
				e.held = true
				return moved
			case packOpen:
				return moved
			}
			continue
		}
		body := p.rx.body()
		if !park && p.recvq.Len() == 0 && startsMessage(p, h.kind, body) {
			e.held = true
			return moved
		}
		moved = true
		switch h.kind {
		case kindCTS, kindFIN, kindRTS:
			e.takeRendezvous(p, h.kind, body)
		case kindEager:
			e.deliverEager(p, body[:h.length])
			p.rx.release()
		case kindFrag:
			e.receiveFragment(p, int(h.length), int(binary.LittleEndian.Uint64(body)), binary.LittleEndian.Uint64(body[8:]))
		case kindFragTo:
			e.receiveFragmentTo(p, int(h.length), binary.LittleEndian.Uint64(body))
		case kindResend:
			w := getWords(body)
			p.rx.release()
			e.resend(p, w[0], w[1], w[2])
		case kindStream:
			w := getWords(body)
			p.rx.release()
			e.stream(p, w[0], w[1])
		case kindSplit:
			w := getWords(body)
			p.rx.release()
			e.pushSplit(p, w[0], w[1], uintptr(w[2]), int(w[3]), int(w[4]))
		case kindSplitBack:
			w := getWords(body)
			p.rx.release()
			e.splitBack(p, w[0], w[1])
		case kindFallback:
			w := getWords(body)
			p.rx.release()
			e.disableSingle(p, e.peerRefused(p, "into", w[1]))
		default:
			panic(fmt.Sprintf("%s: corrupt channel %d->%d: cell kind %d", e.name, p.rank, e.rank, h.kind))
		}
	}
}

// deliverEager hands a whole message from p, msg (in its cell or the
// fast box), to the receive posted for it, or parks a copy.
func (e *Endpoint) deliverEager(p *peer, msg []byte) {
	n := len(msg)
	if r := e.matchNew(p); r != nil {
		if r.device() {
			r.complete(e.getDevice(r, r.buf, msg), truncated(n, len(r.buf)))
		} else {
			r.complete(copy(r.buf, msg), truncated(n, len(r.buf)))
		}
		return
	}
	u := e.newUnexpected(n)
	u.got, u.complete = copy(u.data, msg), true
	e.parkEarly(p, u)
}

// receiveFragment lands a fragment of pipelined message id, size bytes
// long, in its posted receive or unexpected-queue entry; the first
// fragment of a message matches it.
func (e *Endpoint) receiveFragment(p *peer, n, size int, id uint64) {
	i := e.arrivingIndex(p, size, id)
	in := &p.arriving[i]
	src := p.rx.curFrag(n)
	if in.req != nil {
		if dst := in.req.buf[min(in.req.off, len(in.req.buf)):]; in.req.device() {
			e.getDevice(in.req, dst, src)
		} else {
			e.copyOut(dst, src, in.size, len(p.arriving) > 1)
		}
		in.req.off += n
	} else {
		copy(in.unx.data[in.unx.got:], src)
		in.unx.got += n
	}
	p.rx.releaseFrag()
	p.rx.release()
	switch {
	case in.req != nil && in.req.off >= in.size:
		in.req.complete(min(in.size, len(in.req.buf)), truncated(in.size, len(in.req.buf)))
		e.arrived(p, i)
	case in.unx != nil && in.unx.got >= in.size:
		in.unx.complete = true
		if r := in.unx.req; r != nil {
			n := 0
			if r.device() {
				n = e.getDevice(r, r.buf, in.unx.data)
			} else {
				n = copy(r.buf, in.unx.data)
			}
			r.complete(n, truncated(in.size, len(r.buf)))
			e.freeUnexpected(in.unx)
		}
		e.arrived(p, i)
	default:
		p.inTurn = i + 1
	}
}

// copyOut copies a fragment of a size-byte message into its receive
// buffer, with streaming stores from Params.StreamMin for a message
// arriving alone (turns false). Why: when messages take turns
// (Params.Streams) the receiver writes a fragment's worth of each in a
// row, and ordinary stores keep what it writes again in the caches; a
// message alone is faster streamed (docs/transports.md, sm: streams).
func (e *Endpoint) copyOut(dst, src []byte, size int, turns bool) {
	if e.params.StreamMin > 0 && size >= e.params.StreamMin && !turns {
		sys.CopyStream(dst, src)
		return
	}
	e.out.copy(dst, src)
}
