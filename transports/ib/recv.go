package ib

// Completions: polling the completion queue, the messages that arrive in
// the receive slots, failure and sleeping on the completion channel.

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/verbs"
	"github.com/gotune/gotune/transports/msgengine"
)

// progress polls the completion queue, handles what completed and posts
// what waits; it reports whether anything moved.
func (t *Transport) progress() bool {
	moved := false
	for {
		n, err := t.cq.Poll(t.wcs[:])
		if err != nil {
			for _, p := range t.peers {
				if p != nil {
					t.fail(p, err)
				}
			}
			return true
		}
		for _, wc := range t.wcs[:n] {
			t.complete(wc)
		}
		if n == 0 {
			break
		}
		moved = true
	}
	for _, p := range t.peers {
		if p == nil || p.Err != nil {
			continue
		}
		before := p.queue.Len()
		t.takeCredits(p)
		t.flush(p)
		t.returnCredits(p)
		if p.queue.Len() != before {
			moved = true
		}
	}
	return moved
}

func (t *Transport) complete(wc verbs.WC) {
	typ, rank, idx := splitID(wc.ID)
	if rank >= t.size || t.peers[rank] == nil {
		return
	}
	p := t.peers[rank]
	if wc.Status != 0 {
		what := map[int]string{wRecv: "receive", wSend: "send", wRead: "RDMA read", wWrite: "RDMA write", wCredit: "credit write"}[typ]
		t.fail(p, fmt.Errorf("%s completion: %s (status %d; has the peer exited?)", what, verbs.StatusString(wc.Status), wc.Status))
		return
	}
	switch typ {
	case wSend:
		p.sendFree = append(p.sendFree, idx)
		p.sqFree++
	case wCredit:
		p.creditBusy = false
		p.sqFree++
	case wRead:
		p.sqFree++
		if r, last := msgengine.PartDone(&p.RndvRecv, idx); last {
			p.queue.Push(op{kind: kFINRead, seq: idx})
			t.FinishRecv(r)
		}
	case wWrite:
		p.sqFree++
		if r, last := msgengine.PartDone(&p.rndvSend, idx); last {
			t.Finish(r, nil)
		}
	case wRecv:
		t.arrive(p, idx, wc.Len)
	}
}

// header is a message's header as its receive slot holds it.
type header struct {
	kind, mode byte
	seq        uint32
	len        int
	addr       uint64 // the sender's buffer (a read-mode request to send) or the receiver's (a clear-to-send)
	rkey, cum  uint32 // its key; the credits the peer has returned so far
}

// parseHeader reads the header of the n-byte message in slot s. A peer's
// header is checked before it is trusted: a completion shorter than a
// header, a length that is no int, or an eager message whose length is
// not what arrived or exceeds eager is an error.
func parseHeader(s []byte, n, eager int) (header, error) {
	if n < hdrLen || n > len(s) {
		return header{}, fmt.Errorf("a %d-byte message in a %d-byte slot, with a %d-byte header", n, len(s), hdrLen)
	}
	le := binary.LittleEndian
	h := header{kind: s[0], mode: s[1], seq: le.Uint32(s[4:]), addr: le.Uint64(s[16:]), rkey: le.Uint32(s[24:]), cum: le.Uint32(s[28:])}
	ln := le.Uint64(s[8:])
	if ln > math.MaxInt64 {
		return h, fmt.Errorf("message %d of kind %d claims %d bytes", h.seq, h.kind, ln)
	}
	h.len = int(ln)
	if h.kind == kEager && (n != hdrLen+h.len || h.len > eager) {
		return h, fmt.Errorf("eager message %d of %d bytes in a %d-byte completion (ib.eager=%d: do both ranks use the same?)", h.seq, h.len, n, eager)
	}
	return h, nil
}

// arrive handles a message in receive slot i and reposts the slot.
func (t *Transport) arrive(p *peer, i uint32, n int) {
	s := t.recvSlot(p.Rank, i)
	h, err := parseHeader(s, n, t.params.Eager)
	if err != nil {
		t.fail(p, err)
		return
	}
	kind, mode, seq, ln, addr, rkey := h.kind, h.mode, h.seq, h.len, h.addr, h.rkey
	if int32(h.cum-p.returned) > 0 {
		p.returned = h.cum
	}
	switch kind {
	case kEager:
		if p.Posted.Len() > 0 {
			r := p.Posted.Pop()
			r.MsgLen = ln
			r.N = copy(r.Buf, s[hdrLen:hdrLen+ln])
			t.FinishRecv(r)
			break
		}
		a := &arrival{kind: kEager, seq: seq, len: ln, data: t.EagerBuf()}
		copy(a.data, s[hdrLen:hdrLen+ln])
		p.Unexpected.Push(a)
	case kRTS:
		t.Deliver(&p.Peer, &arrival{kind: kRTS, mode: mode, seq: seq, len: ln, addr: addr, rkey: rkey})
	case kCTS:
		r, ok := msgengine.Find(p.rndvSend, seq)
		if !ok {
			err = fmt.Errorf("clear-to-send for message %d that is not waiting", seq)
			break
		}
		if ln > len(r.Buf) {
			// Writing more would send the peer what lies past the buffer.
			err = fmt.Errorf("clear-to-send for %d bytes of message %d, which has %d", ln, seq, len(r.Buf))
			break
		}
		if ln == 0 {
			p.rndvSend = msgengine.Remove(p.rndvSend, r)
			p.queue.Push(op{kind: kFINWrite, seq: seq})
			t.Finish(r, nil)
			break
		}
		e, gerr := t.reg.get(sys.AddressOf(r.Buf), ln)
		if gerr != nil {
			err = gerr
			break
		}
		r.ent = e
		lkey, _ := e.r.Keys()
		for off := 0; off < ln; off += t.maxMsg {
			l := min(t.maxMsg, ln-off)
			p.queue.Push(op{rdma: verbs.OpRDMAWrite, seq: seq, laddr: sys.AddressOf(r.Buf) + uintptr(off), llen: l, lkey: lkey, addr: addr + uint64(off), rkey: rkey})
			r.Pending++
		}
		p.queue.Push(op{kind: kFINWrite, seq: seq})
	case kFINRead:
		r, ok := msgengine.Take(&p.rndvSend, seq)
		if !ok {
			err = fmt.Errorf("read-done for message %d that is not waiting", seq)
			break
		}
		t.Finish(r, nil)
	case kFINWrite:
		r, ok := msgengine.Take(&p.RndvRecv, seq)
		if !ok {
			err = fmt.Errorf("write-done for message %d that is not waiting", seq)
			break
		}
		t.FinishRecv(r)
	default:
		err = fmt.Errorf("message of unknown kind %d", kind)
	}
	if err != nil {
		t.fail(p, err)
		return
	}
	if perr := p.qp.PostRecv(wrID(wRecv, p.Rank, i), sys.AddressOf(s), len(s), t.mr.LKey); perr != nil {
		t.fail(p, perr)
		return
	}
	p.reposted++
	t.flush(p)
}

// fail ends every operation with the peer with err; the first failure
// wins.
func (t *Transport) fail(p *peer, err error) {
	if p.Err != nil {
		return
	}
	err = fmt.Errorf("ib: rank %d with rank %d (%s): %w", t.rank, p.Rank, t.dev, err)
	t.Fail(&p.Peer, err)
	for p.queue.Len() > 0 {
		if o := p.queue.Pop(); o.req != nil {
			t.Finish(o.req, t.OpErr(o.req, err))
		}
	}
	t.FailAll(p.rndvSend, err)
	p.rndvSend = nil
}

// sleep arms the CQ and sleeps on the channel until a completion. Credits
// returned by RDMA write raise no completion: a rank waiting for them
// wakes every millisecond to look.
func (t *Transport) sleep() {
	if err := t.cq.RequestNotify(); err != nil {
		return
	}
	if t.progress() { // a completion that came before the arming
		return
	}
	timeout := 100
	for _, p := range t.peers {
		if p != nil && p.queue.Len() > 0 {
			timeout = 1
		}
	}
	fds := []sys.PollFD{{Fd: int32(t.ch.FD()), Events: sys.PollIn}}
	if n, _ := sys.Poll(fds, timeout); n > 0 {
		t.ch.GetEvent()
	}
}
