package sm

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/gotune/gotune/internal/sys"
)

// The rendezvous protocol and its fallback.
//
// Pull: the sender publishes RTS (size, address, its request id); the
// receiver copies from the sender's buffer and answers FIN. Push: the
// receiver answers RTS with CTS (its request id, address, capacity); the
// sender copies into the receiver's buffer and answers FIN.
//
// When the copy is refused in a way that means "not here" (the error
// matches ErrNotSupported: ptrace rules, no kernel support), the message is
// not lost and nothing fails: the side that failed tells its peer (Resend
// from a pull receiver, Fallback from a push sender), the sender streams the
// message through the fragment ring, each fragment cell naming the receive
// it is for (FragTo), and neither side uses single copy with the other again.
// Any other copy error (the peer has exited: ESRCH; a bad address: EFAULT)
// fails the message on both sides: the failing side with its error, the peer
// through a failed FIN that carries the errno.

// FIN status words.
const (
	finOK     = 0
	finFailed = 1
)

// takeRendezvous takes p's current cell, a rendezvous cell of kind with
// body, from the ring and answers it: a clear-to-send starts this rank's
// push, a completion finishes the request it names, a request-to-send is
// matched with the oldest posted receive or parked until one is posted.
func (e *Endpoint) takeRendezvous(p *peer, kind uint8, body []byte) {
	w := getWords(body)
	p.rx.release()
	switch kind {
	case kindCTS:
		e.pushRendezvous(p, w[0], w[1], uintptr(w[2]), int(w[3]), w[4])
	case kindFIN:
		e.finishRendezvous(p, w[0], w[1], w[2], w[3])
	case kindRTS:
		size, addr, id, sender := int(w[0]), uintptr(w[1]), w[2], Place(w[3])
		if r := e.matchNew(p); r != nil {
			e.startRendezvousRecv(p, r, size, addr, id, sender, w[4])
			return
		}
		u := e.newUnexpected(0)
		u.rts, u.size, u.addr, u.id, u.place, u.handle = true, size, addr, id, sender, w[4]
		e.parkEarly(p, u)
	}
}

// routeFor is how a rendezvous message of size bytes moves from the
// sender's place into a receive at receiver: the mechanism's default
// direction, or its Router's choice.
func (e *Endpoint) routeFor(size int, sender, receiver Place) Route {
	if c, ok := e.single.(Router); ok {
		return c.RouteFor(size, sender, receiver)
	}
	if e.single.Pull() {
		return RoutePull
	}
	return RoutePush
}

// startRendezvousRecv moves a matched rendezvous message. As with the
// other protocols, a message longer than the buffer fills the buffer and
// the receive fails with ErrTruncated; the sender completes normally.
// handle is what the sender exported (Exporter), 0 for none.
func (e *Endpoint) startRendezvousRecv(p *peer, r *request, size int, addr uintptr, sendID uint64, sender Place, handle uint64) {
	r.proto, r.n = protoRendezvous, size
	route := e.routeFor(size, sender, r.place)
	if route == RouteSplit {
		if m := min(size, len(r.buf)); p.pulled && !p.noSingle && !p.noSplit && handle == 0 && e.events == nil && m >= 2*splitMin {
			e.startSplitRecv(p, r, m, addr, sendID)
			return
		}
		route = RoutePull
	}
	switch route {
	case RouteFragments:
		e.askResend(p, r, kindStream, sendID, 0)
		return
	case RoutePush:
		if e.export != nil && !p.noSingle {
			h, err := e.export.Export(r.buf, r.place, true)
			switch {
			case err == nil:
				r.handle = h
			case errors.Is(err, sys.ErrNotSupported):
				e.disableSingle(p, fmt.Errorf("%s: export for rank %d refused, copy-in/copy-out from now on: %w", e.single.Name(), p.rank, err))
				e.askResend(p, r, kindResend, sendID, sys.Errno(err))
				return
			default:
				r.complete(0, fmt.Errorf("%s: %s (pid %d): %w", e.name, r.describe(), p.pid, err))
				e.queueCtrl(p, kindFIN, sendID, finFailed, sys.Errno(err), 0)
				return
			}
		}
		e.nextID++
		r.id, r.waiting = e.nextID, true
		e.rndv[r.id] = r
		e.queueCtrlWords(p, kindCTS, [5]uint64{sendID, r.id, uint64(addressOf(r.buf)), uint64(len(r.buf)), r.handle})
		return
	}
	if p.noSingle {
		e.askResend(p, r, kindResend, sendID, 0)
		return
	}
	n := min(size, len(r.buf))
	err := e.startCopy(p, r, r.buf[:n], addr, handle, true, sendID, n, truncated(size, len(r.buf)))
	switch {
	case err == nil:
	case errors.Is(err, sys.ErrNotSupported):
		e.disableSingle(p, fmt.Errorf("%s single copy from rank %d refused, copy-in/copy-out from now on: %w", e.single.Name(), p.rank, err))
		e.askResend(p, r, kindResend, sendID, sys.Errno(err))
	default:
		r.complete(0, fmt.Errorf("%s: %s (pid %d): %w", e.name, r.describe(), p.pid, err))
		e.queueCtrl(p, kindFIN, sendID, finFailed, sys.Errno(err), 0)
	}
}

// splitMin is the smallest part of a split copy: below it the second
// message's round trip costs more than the second core saves.
const splitMin = 32 << 10

// splitPoint is where the sender's part of an m-byte split copy starts:
// halfway, on a cache line.
func splitPoint(m int) int { return m / 2 &^ 63 }

// startSplitRecv moves a matched rendezvous message of m bytes (what the
// buffer takes of it) by two copies at once: it asks the sender to copy
// the second part into r's buffer (kindSplit), then pulls the first part
// itself. r completes, and the sender hears it is done with its buffer,
// once both parts have moved (splitPartDone).
func (e *Endpoint) startSplitRecv(p *peer, r *request, m int, addr uintptr, sendID uint64) {
	k := splitPoint(m)
	e.nextID++
	r.id, r.waiting = e.nextID, true
	r.parts, r.peerID, r.remote = 2, sendID, addr
	e.rndv[r.id] = r
	e.queueCtrlWords(p, kindSplit, [5]uint64{sendID, r.id, uint64(addressOf(r.buf)), uint64(m), uint64(k)})
	e.splitPartDone(p, r, e.single.Copy(p.pid, r.buf[:k], r.place, addr, true))
}

// splitPartDone counts one part of split receive r as moved (or failed
// with err). With both done it completes r and tells the sender, whose
// buffer this side no longer reads: a failed part fails the message on
// both sides, as a failed single copy does.
func (e *Endpoint) splitPartDone(p *peer, r *request, err error) {
	if err != nil && r.splitErr == nil {
		r.splitErr = fmt.Errorf("%s: %s (pid %d): split copy: %w", e.name, r.describe(), p.pid, err)
	}
	if r.parts--; r.parts > 0 {
		return
	}
	delete(e.rndv, r.id)
	if r.splitErr != nil {
		e.queueCtrl(p, kindFIN, r.peerID, finFailed, sys.Errno(r.splitErr), 0)
		r.complete(0, r.splitErr)
		return
	}
	e.queueCtrl(p, kindFIN, r.peerID, finOK, 0, 0)
	r.complete(min(r.n, len(r.buf)), truncated(r.n, len(r.buf)))
}

// pushSplit is the sender's part of a split copy: bytes [k, m) of send
// sendID into the receiver's buffer at addr. The send stays open until the
// receiver's FIN says both parts have moved. A refused copy hands the
// part back to the receiver (kindSplitBack), which can pull it: it has
// pulled from this side before.
func (e *Endpoint) pushSplit(p *peer, sendID, recvID uint64, addr uintptr, m, k int) {
	r := e.rndv[sendID]
	if r == nil {
		panic(fmt.Sprintf("%s: split copy for unknown request %d", e.name, sendID))
	}
	if m > len(r.buf) || k > m {
		e.queueCtrl(p, kindFIN, recvID, finFailed, uint64(syscall.EINVAL), 0)
		return
	}
	err := e.single.Copy(p.pid, r.buf[k:m], r.place, addr+uintptr(k), false)
	switch {
	case err == nil:
		e.queueCtrl(p, kindFIN, recvID, finOK, 0, 0)
	case errors.Is(err, sys.ErrNotSupported):
		e.queueCtrl(p, kindSplitBack, recvID, sys.Errno(err), 0, 0)
	default:
		e.queueCtrl(p, kindFIN, recvID, finFailed, sys.Errno(err), 0)
	}
}

// splitBack pulls the part of split receive id its sender could not copy,
// and splits no more with that peer.
func (e *Endpoint) splitBack(p *peer, id, errno uint64) {
	r := e.rndv[id]
	if r == nil || r.parts == 0 {
		panic(fmt.Sprintf("%s: split part handed back for unknown request %d", e.name, id))
	}
	p.noSplit = true
	m := min(r.n, len(r.buf))
	k := splitPoint(m)
	e.splitPartDone(p, r, e.single.Copy(p.pid, r.buf[k:m], r.place, r.remote+uintptr(k), true))
}

// askResend turns a rendezvous receive into a fragment receive: r waits,
// under a fresh id, for the sender to stream the message through the
// fragments. kind says why: kindResend for a refused single copy (the
// sender gives single copy up), kindStream for a message the route sends
// through the fragments (single copy stays on).
func (e *Endpoint) askResend(p *peer, r *request, kind uint8, sendID, errno uint64) {
	e.nextID++
	r.id, r.waiting, r.off = e.nextID, true, 0
	e.rndv[r.id] = r
	e.queueCtrl(p, kind, sendID, r.id, errno, 0)
}

// resend handles a pull receiver's refusal: send sendID goes through the
// fragments to its receive recvID.
func (e *Endpoint) resend(p *peer, sendID, recvID, errno uint64) {
	e.disableSingle(p, e.peerRefused(p, "from", errno))
	e.stream(p, sendID, recvID)
}

// stream sends rendezvous send sendID through the fragments to its receive
// recvID.
func (e *Endpoint) stream(p *peer, sendID, recvID uint64) {
	r := e.rndv[sendID]
	if r == nil {
		panic(fmt.Sprintf("%s: fragments asked for unknown request %d", e.name, sendID))
	}
	delete(e.rndv, sendID)
	e.releaseHandle(r, false)
	e.sendByFragments(p, r, recvID)
}

// pushRendezvous answers a clear-to-send: the sender copies into the
// receiver's buffer (through its handle, when the receiver exported one).
func (e *Endpoint) pushRendezvous(p *peer, sendID, recvID uint64, addr uintptr, capacity int, handle uint64) {
	r := e.rndv[sendID]
	if r == nil {
		panic(fmt.Sprintf("%s: clear-to-send for unknown request %d", e.name, sendID))
	}
	delete(e.rndv, sendID)
	e.releaseHandle(r, false) // a handle of the request-to-send: the receiver pushed instead
	if p.noSingle {
		e.sendByFragments(p, r, recvID)
		return
	}
	err := e.startCopy(p, r, r.buf[:min(len(r.buf), capacity)], addr, handle, false, recvID, len(r.buf), nil)
	switch {
	case err == nil:
	case errors.Is(err, sys.ErrNotSupported):
		e.disableSingle(p, fmt.Errorf("%s single copy into rank %d refused, copy-in/copy-out from now on: %w", e.single.Name(), p.rank, err))
		e.queueCtrl(p, kindFallback, recvID, sys.Errno(err), 0, 0)
		e.sendByFragments(p, r, recvID)
	default:
		r.complete(0, fmt.Errorf("%s: %s (pid %d): %w", e.name, r.describe(), p.pid, err))
		e.queueCtrl(p, kindFIN, recvID, finFailed, sys.Errno(err), 0)
	}
}

// sendByFragments queues rendezvous send r for the fragment path to the
// receiver's request recvID.
func (e *Endpoint) sendByFragments(p *peer, r *request, recvID uint64) {
	r.proto, r.id, r.off, r.waiting = protoFallback, recvID, 0, false
	p.fallq.Push(r)
	e.progressSend(p)
}

// peerRefused is the fallback reason recorded on the side whose peer's
// single copy was refused.
func (e *Endpoint) peerRefused(p *peer, dir string, errno uint64) error {
	cause := "refused"
	if err := sys.ErrnoError(errno); err != nil {
		cause = err.Error()
	}
	return fmt.Errorf("rank %d could not single-copy %s this rank (%s: %s); copy-in/copy-out from now on", p.rank, dir, e.single.Name(), cause)
}

// disableSingle stops single copy with p, keeping the first reason.
func (e *Endpoint) disableSingle(p *peer, why error) {
	if !p.noSingle {
		p.noSingle, p.fallback = true, why
	}
}

// progressFallback streams re-routed rendezvous sends through the
// fragment ring. Each fragment cell names the receive it is for, so these
// fragments may interleave with an ordinary pipelined message.
func (e *Endpoint) progressFallback(p *peer) bool {
	moved := false
	for p.fallq.Len() > 0 {
		r := p.fallq.Front()
		if e.sendFragments(p, r, kindFragTo, r.id, 0) {
			moved = true
		}
		if r.off < len(r.buf) {
			return moved
		}
		r.complete(len(r.buf), nil)
		p.fallq.Pop()
		moved = true
	}
	return moved
}

// receiveFragmentTo lands a fallback fragment in the receive it names.
func (e *Endpoint) receiveFragmentTo(p *peer, n int, id uint64) {
	r := e.rndv[id]
	if r == nil {
		panic(fmt.Sprintf("%s: corrupt channel %d->%d: fragment for unknown request %d", e.name, p.rank, e.rank, id))
	}
	if dst, src := r.buf[min(r.off, len(r.buf)):], p.rx.curFrag(n); r.device() {
		e.getDevice(r, dst, src)
	} else {
		e.copyOut(dst, src, len(r.buf), false)
	}
	r.off += n
	p.rx.releaseFrag()
	p.rx.release()
	if size := r.n; r.off >= size {
		delete(e.rndv, id)
		e.releaseHandle(r, false) // a clear-to-send's handle: the sender fell back
		r.complete(min(size, len(r.buf)), truncated(size, len(r.buf)))
	}
}

// queueCtrl sends a control cell now if the ring has room, else queues it
// ahead of all data for the next progress call.
func (e *Endpoint) queueCtrl(p *peer, kind uint8, w0, w1, w2, w3 uint64) {
	e.queueCtrlWords(p, kind, [5]uint64{w0, w1, w2, w3})
}

// queueCtrlWords is queueCtrl with all five words.
func (e *Endpoint) queueCtrlWords(p *peer, kind uint8, w [5]uint64) {
	p.ctrl.Push(ctrlMsg{kind: kind, words: w})
	e.progressSend(p)
}

// releaseHandle gives back what r exported, if anything: used says whether the
// peer's copy ran.
func (e *Endpoint) releaseHandle(r *request, used bool) {
	if r.handle != 0 {
		e.export.Release(r.handle, used)
		r.handle = 0
	}
}

// finishRendezvous completes rendezvous id on its FIN: a failure at once,
// a success at once or, when the FIN carries an event token, once the
// peer's copy has finished.
func (e *Endpoint) finishRendezvous(p *peer, id, status, errno, token uint64) {
	r := e.rndv[id]
	if r == nil {
		panic(fmt.Sprintf("%s: completion for unknown request %d", e.name, id))
	}
	if r.parts > 0 { // a split receive: the sender's part has moved, or failed
		var err error
		if status != finOK {
			err = fmt.Errorf("rank %d failed its part", p.rank)
			if cause := sys.ErrnoError(errno); cause != nil {
				err = fmt.Errorf("%w: %w", err, cause)
			}
		}
		e.splitPartDone(p, r, err)
		return
	}
	delete(e.rndv, id)
	e.releaseHandle(r, status == finOK)
	if status != finOK {
		err := fmt.Errorf("%s: %s: rank %d failed the single copy", e.name, r.describe(), r.peer.rank)
		if cause := sys.ErrnoError(errno); cause != nil {
			err = fmt.Errorf("%w: %w", err, cause)
		}
		r.complete(0, err)
		return
	}
	n, err := len(r.buf), error(nil)
	if !r.isSend { // a pushed receive: r.n holds the message size from the RTS
		n, err = min(r.n, len(r.buf)), truncated(r.n, len(r.buf))
	}
	switch {
	case token == 0:
		r.complete(n, err)
	case e.events != nil:
		e.awaitCopy(r, p.rank, token, n, err)
	default:
		r.complete(0, fmt.Errorf("%s: %s: rank %d's copy completes by an event this rank cannot wait on (ranks configured differently)", e.name, r.describe(), p.rank))
	}
}
