package ib

// The send path: starting sends, answering requests to send, posting
// queued work requests within the credits, and returning credits.

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/verbs"
)

// start queues a numbered send: eager, the payload to copy into a slot;
// else a request to send (ib.rndv=read: with the registered buffer's
// address and key).
func (t *Transport) start(r *request) {
	p, buf := t.peers[r.Rank], r.Buf
	if len(buf) <= t.params.Eager {
		p.queue.Push(op{kind: kEager, seq: r.Seq, len: uint64(len(buf)), payload: buf, req: r})
	} else {
		r.Rndv = true
		o := op{kind: kRTS, mode: modeWrite, seq: r.Seq, len: uint64(len(buf))}
		if t.params.Rndv == "read" {
			_, rkey, ok := t.register(r, len(buf))
			if !ok {
				return
			}
			o.mode, o.addr, o.rkey = modeRead, uint64(sys.AddressOf(buf)), rkey
		}
		p.queue.Push(o)
		p.rndvSend = append(p.rndvSend, r)
	}
	t.flush(p)
}

// register registers the first n bytes of r's buffer for r, until r
// completes; where that fails it ends r with the error.
func (t *Transport) register(r *request, n int) (lkey, rkey uint32, ok bool) {
	e, err := t.reg.get(sys.AddressOf(r.Buf), n)
	if err != nil {
		t.Finish(r, t.OpErr(r, err))
		return 0, 0, false
	}
	r.ent = e
	lkey, rkey = e.r.Keys()
	return lkey, rkey, true
}

// release drops the registration a request held.
func (t *Transport) release(r *request) {
	if r.ent != nil {
		t.reg.put(r.ent)
		r.ent = nil
	}
}

// match hands an arrival to its receive.
func (t *Transport) match(r *request, a *arrival) {
	p := t.peers[r.Rank]
	r.MsgLen = a.len
	switch a.kind {
	case kEager:
		r.N = copy(r.Buf, a.data[:a.len])
		t.PutEagerBuf(a.data)
		t.FinishRecv(r)
	case kRTS:
		r.Rndv = true
		r.N = min(a.len, len(r.Buf))
		if a.mode == modeRead {
			if r.N == 0 {
				p.queue.Push(op{kind: kFINRead, seq: a.seq})
				t.FinishRecv(r)
				break
			}
			lkey, _, ok := t.register(r, r.N)
			if !ok {
				break
			}
			for off := 0; off < r.N; off += t.maxMsg {
				l := min(t.maxMsg, r.N-off)
				p.queue.Push(op{rdma: verbs.OpRDMARead, seq: a.seq, laddr: sys.AddressOf(r.Buf) + uintptr(off), llen: l, lkey: lkey, addr: a.addr + uint64(off), rkey: a.rkey})
				r.Pending++
			}
			p.RndvRecv = append(p.RndvRecv, r)
			break
		}
		o := op{kind: kCTS, seq: a.seq, len: uint64(r.N)}
		if r.N > 0 {
			_, rkey, ok := t.register(r, r.N)
			if !ok {
				break
			}
			o.addr, o.rkey = uint64(sys.AddressOf(r.Buf)), rkey
		}
		p.queue.Push(o)
		p.RndvRecv = append(p.RndvRecv, r)
	}
	t.flush(p)
}

// flush posts queued work requests in order while the peer has credits,
// send slots and send queue entries for them.
func (t *Transport) flush(p *peer) {
	for p.queue.Len() > 0 && p.Err == nil {
		o := p.queue.Front()
		if p.sqFree == 0 {
			return
		}
		if o.kind == 0 { // RDMA read or write
			typ := wRead
			if o.rdma == verbs.OpRDMAWrite {
				typ = wWrite
			}
			err := p.qp.PostSend(verbs.SendWR{ID: wrID(typ, p.Rank, o.seq), Op: o.rdma, Addr: o.laddr, Len: o.llen, LKey: o.lkey, RemoteAddr: o.addr, RKey: o.rkey, Signaled: true})
			if err != nil {
				t.fail(p, err)
				return
			}
			p.sqFree--
			p.queue.Pop()
			continue
		}
		t.takeCredits(p)
		if p.sent-p.returned >= uint32(t.params.Credits) || len(p.sendFree) == 0 {
			return
		}
		i := p.sendFree[len(p.sendFree)-1]
		s := t.sendSlot(p.Rank, i)
		h := s[:hdrLen]
		h[0], h[1] = o.kind, o.mode
		le := binary.LittleEndian
		le.PutUint32(h[4:], o.seq)
		le.PutUint64(h[8:], o.len)
		le.PutUint64(h[16:], o.addr)
		le.PutUint32(h[24:], o.rkey)
		le.PutUint32(h[28:], p.reposted)
		n := hdrLen
		if o.kind == kEager {
			n += copy(s[hdrLen:], o.payload)
		}
		if err := p.qp.PostSend(verbs.SendWR{ID: wrID(wSend, p.Rank, i), Op: verbs.OpSend, Addr: sys.AddressOf(s), Len: n, LKey: t.mr.LKey, Signaled: true}); err != nil {
			t.fail(p, err)
			return
		}
		p.sendFree = p.sendFree[:len(p.sendFree)-1]
		p.sqFree--
		p.sent++
		p.told = p.reposted
		if o.req != nil {
			t.Finish(o.req, nil) // eager: the payload is in the slot
		}
		p.queue.Pop()
	}
}

// takeCredits reads the count the peer RDMA-wrote into our control area.
func (t *Transport) takeCredits(p *peer) {
	w := (*uint32)(unsafe.Pointer(&t.ctrl(p.Rank)[0]))
	if v := atomic.LoadUint32(w); int32(v-p.returned) > 0 {
		p.returned = v
	}
}

// returnCredits tells the peer how many of its messages we have taken
// out of our slots when it is owed half its credits or more and nothing
// else carries the count: an RDMA write into its control area (no
// receive slot, so no credit, is needed for it).
func (t *Transport) returnCredits(p *peer) {
	owed := p.reposted - p.told
	if owed == 0 || owed < uint32(max(1, t.params.Credits/2)) || p.creditBusy || p.sqFree == 0 || p.Err != nil {
		return
	}
	src := t.ctrl(p.Rank)[8:12]
	binary.LittleEndian.PutUint32(src, p.reposted)
	if err := p.qp.PostSend(verbs.SendWR{ID: wrID(wCredit, p.Rank, 0), Op: verbs.OpRDMAWrite, Addr: sys.AddressOf(src), Len: 4, LKey: t.mr.LKey,
		RemoteAddr: p.remoteCtrl, RKey: p.remoteCtrlKey, Signaled: true}); err != nil {
		t.fail(p, err)
		return
	}
	p.sqFree--
	p.creditBusy = true
	p.told = p.reposted
}
