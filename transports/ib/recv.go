package ib

// Completions: polling the completion queue, the messages that arrive in
// the receive slots, failure and sleeping on the completion channel.

import (
	"encoding/binary"
	"fmt"

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

// arrive handles a message in receive slot i and reposts the slot.
func (t *Transport) arrive(p *peer, i uint32, n int) {
	s := t.recvSlot(p.Rank, i)
	le := binary.LittleEndian
	kind, mode := s[0], s[1]
	seq, ln := le.Uint32(s[4:]), int(le.Uint64(s[8:]))
	addr, rkey, cum := le.Uint64(s[16:]), le.Uint32(s[24:]), le.Uint32(s[28:])
	if int32(cum-p.returned) > 0 {
		p.returned = cum
	}
	var err error
	switch kind {
	case kEager:
		if n != hdrLen+ln || ln > t.params.Eager {
			err = fmt.Errorf("eager message %d of %d bytes in a %d-byte completion (ib.eager=%d: do both ranks use the same?)", seq, ln, n, t.params.Eager)
			break
		}
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
