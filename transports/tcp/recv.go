package tcp

// The receive path: matching arrivals with receives, the staged reads and
// the frames they carry.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports/msgengine"
)

func (t *Transport) newArrival(kind byte, seq uint32, n int) *arrival {
	a := t.freeArr.Get()
	*a = arrival{kind: kind, seq: seq, len: n}
	return a
}

// match hands a numbered receive the oldest unexpected arrival: an eager
// payload (copied once it is all here) or a request to send (answered).
func (t *Transport) match(r *request, a *arrival) {
	switch a.kind {
	case kEager:
		r.MsgLen = a.len
		if a.complete {
			t.deliverArrival(r, a)
		} else {
			a.req = r
		}
	case kRTS:
		t.clearToSend(r, a.len)
		t.freeArr.Put(a)
	}
}

// deliverArrival copies a buffered eager message into its receive.
func (t *Transport) deliverArrival(r *request, a *arrival) {
	r.N = copy(r.Buf, a.data[:a.len])
	t.PutEagerBuf(a.data)
	*a = arrival{}
	t.freeArr.Put(a)
	t.FinishRecv(r)
}

// read takes in what the socket holds and dispatches it. A read that
// returns less than it asked for has drained the socket: the next one waits
// for poll(2) to see more (rdWait) rather than find it empty.
func (c *conn) read() (bool, error) {
	moved := false
	for {
		var a, b []byte
		switch {
		case c.r < c.w:
			// Staged bytes first: a header, or payload that came with one.
			err := c.consume()
			if err == nil {
				moved = true
				continue
			}
			if err != errPartial {
				return true, err
			}
			// A partial header: move it to the front and read the rest.
			k := copy(c.stage, c.stage[c.r:c.w])
			c.r, c.w = 0, k
			a = c.stage[k:]
		case c.inHdr && c.dpos < len(c.dst):
			// The rest of a payload straight into its destination;
			// what follows it lands in the stage.
			c.r, c.w = 0, 0
			a, b = c.dst[c.dpos:], c.stage
		default:
			c.r, c.w = 0, 0
			a = c.stage
		}
		n, err := c.rcv.Recv(a, b)
		if err == sys.ErrWouldBlock {
			c.rdWait = true
			return moved, nil
		}
		if err != nil {
			return true, c.wrap(err)
		}
		if n == 0 {
			return true, c.closed()
		}
		moved = true
		if b != nil {
			k := min(n, len(a))
			c.plen -= k
			c.dpos += k
			c.w = n - k
			c.payloadDone(k)
		} else {
			c.w += n
		}
		if n < len(a)+len(b) {
			c.rdWait = true // drained: consume what came, then ask poll
			for c.r < c.w {
				if err := c.consume(); err == errPartial {
					break
				} else if err != nil {
					return true, err
				}
			}
			return moved, nil
		}
	}
}

// consume handles staged bytes: a header, or part of a payload. It returns
// errPartial when less than a header is staged.
func (c *conn) consume() error {
	if c.inHdr {
		n := min(c.w-c.r, c.plen)
		placed := copy(c.dst[c.dpos:], c.stage[c.r:c.r+n]) // the rest is dropped
		c.r += n
		c.plen -= n
		c.dpos += placed
		c.payloadDone(placed)
		return nil
	}
	if c.w-c.r < hdrLen {
		return errPartial
	}
	h := c.stage[c.r : c.r+hdrLen]
	c.r += hdrLen
	kind, seq := h[0], binary.LittleEndian.Uint32(h[4:])
	n, off := binary.LittleEndian.Uint64(h[8:]), binary.LittleEndian.Uint64(h[16:])
	if n > maxFrame || off > maxFrame {
		// A peer's header is not trusted: beyond this it would read as a
		// negative int.
		return c.wrap(fmt.Errorf("frame of kind %d with length %d at offset %d", kind, n, off))
	}
	return c.dispatch(kind, seq, int(n), int(off))
}

// maxFrame bounds a frame header's length and offset.
const maxFrame = math.MaxInt64

// errPartial: less than a header is staged.
var errPartial = errors.New("partial header")

// dispatch starts handling one frame.
func (c *conn) dispatch(kind byte, seq uint32, n, off int) error {
	t, p := c.t, c.peer
	switch kind {
	case kEager:
		if n > t.params.Eager {
			return c.wrap(fmt.Errorf("eager message of %d bytes over tcp.eager=%d: do both ranks use the same tcp.eager?", n, t.params.Eager))
		}
		c.startPayload(kind, seq, n)
		if p.Posted.Len() > 0 {
			r := p.Posted.Pop()
			r.MsgLen = n
			c.areq = r
			c.dst = r.Buf[:min(n, len(r.Buf))]
		} else {
			a := t.newArrival(kEager, seq, n)
			a.data = t.EagerBuf()
			p.Unexpected.Push(a)
			c.arr = a
			c.dst = a.data[:n]
		}
		if n == 0 {
			c.payloadDone(0)
		}
	case kRTS:
		a := t.newArrival(kRTS, seq, n)
		a.complete = true
		t.Deliver(&p.Peer, a)
	case kCTS:
		if p.ctsWait.Len() == 0 || p.ctsWait.Front().Seq != seq {
			return c.wrap(fmt.Errorf("clear-to-send for message %d that is not waiting", seq))
		}
		if r := p.ctsWait.Front(); n > len(r.Buf) {
			return c.wrap(fmt.Errorf("clear-to-send for %d bytes of message %d, which has %d", n, seq, len(r.Buf)))
		}
		t.stripe(p.ctsWait.Pop(), n)
	case kData:
		r, ok := msgengine.Find(p.RndvRecv, seq)
		if !ok || off > r.N || n > r.N-off { // off+n may overflow
			return c.wrap(fmt.Errorf("payload for message %d (%d bytes at %d) that is not expected", seq, n, off))
		}
		c.startPayload(kind, seq, n)
		c.areq = r
		c.dst = r.Buf[off : off+n]
		if n == 0 {
			c.payloadDone(0)
		}
	default:
		return c.wrap(fmt.Errorf("frame of unknown kind %d", kind))
	}
	return nil
}

func (c *conn) startPayload(kind byte, seq uint32, n int) {
	c.inHdr, c.kind, c.seq, c.plen = true, kind, seq, n
	c.dst, c.dpos, c.areq, c.arr = nil, 0, nil, nil
}

// payloadDone accounts n payload bytes just placed; at the frame's end it
// completes what the frame completes.
func (c *conn) payloadDone(n int) {
	t, p := c.t, c.peer
	if c.kind == kData && c.areq != nil {
		c.areq.Pending -= n
		if c.areq.Pending == 0 {
			r := c.areq
			p.RndvRecv = msgengine.Remove(p.RndvRecv, r)
			t.FinishRecv(r)
			c.areq = nil
		}
	}
	if c.plen > 0 {
		return
	}
	// Frame over. An eager payload longer than the receive buffer left
	// plen counting the dropped tail: see startPayload's callers.
	if c.kind == kEager {
		if c.areq != nil {
			r := c.areq
			r.N = len(c.dst)
			t.FinishRecv(r)
		} else if a := c.arr; a != nil {
			a.complete = true
			if a.req != nil {
				t.deliverArrival(a.req, a)
			}
		}
	}
	c.inHdr, c.dst, c.areq, c.arr = false, nil, nil, nil
}
