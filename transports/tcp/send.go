package tcp

// The send path: frames, eager sends and requests to send, the
// rendezvous payload striped over the connections, writes and
// MSG_ZEROCOPY completions.

import (
	"encoding/binary"

	"github.com/gotune/gotune/internal/sys"
)

func (t *Transport) newFrame(kind byte, seq uint32, n, off int, payload []byte, req *request) *frame {
	f := t.freeFrames.Get()
	f.hdr[0] = kind
	binary.LittleEndian.PutUint32(f.hdr[4:], seq)
	binary.LittleEndian.PutUint64(f.hdr[8:], uint64(n))
	binary.LittleEndian.PutUint64(f.hdr[16:], uint64(off))
	f.payload, f.req = payload, req
	return f
}

// start puts a numbered send on the wire: eager, header and payload on the
// first connection; else a request to send, the payload waiting for the
// clear-to-send.
func (t *Transport) start(r *request) {
	p := t.peers[r.Rank]
	c := p.conns[0]
	if len(r.Buf) <= t.params.Eager {
		r.Pending = 1
		c.out.Push(t.newFrame(kEager, r.Seq, len(r.Buf), 0, r.Buf, r))
	} else {
		r.Rndv = true
		c.out.Push(t.newFrame(kRTS, r.Seq, len(r.Buf), 0, nil, nil))
		p.ctsWait.Push(r)
	}
	if err := c.flush(); err != nil {
		t.fail(p, err)
	}
}

// clearToSend answers a request to send: the receive takes min(n, len(buf)).
func (t *Transport) clearToSend(r *request, n int) {
	p := t.peers[r.Rank]
	r.Rndv, r.MsgLen = true, n
	r.N = min(n, len(r.Buf))
	r.Pending = r.N
	if p.Err != nil {
		t.Finish(r, p.Err)
		return
	}
	c := p.conns[0]
	c.out.Push(t.newFrame(kCTS, r.Seq, r.N, 0, nil, nil))
	if r.Pending == 0 {
		t.FinishRecv(r)
	} else {
		p.RndvRecv = append(p.RndvRecv, r)
	}
	if err := c.flush(); err != nil {
		t.fail(p, err)
	}
}

// flush writes queued frames until the socket is full.
func (c *conn) flush() error {
	t := c.t
	for c.out.Len() > 0 {
		f := c.out.Front()
		var a, b []byte
		if f.off < hdrLen {
			a, b = f.hdr[f.off:], f.payload
		} else {
			a = f.payload[f.off-hdrLen:]
		}
		zc := c.zc && f.hdr[0] == kData && len(f.payload) >= t.params.ZeroCopy
		n, err := c.snd.Send(a, b, zc)
		if err == sys.ErrWouldBlock {
			return nil
		}
		if err != nil {
			return c.wrap(err)
		}
		if zc {
			f.zc, f.zcLast = true, c.zcID
			c.zcID++
		}
		f.off += n
		if f.off < hdrLen+len(f.payload) {
			return nil // a short write: the socket is full
		}
		c.out.Pop()
		if f.zc {
			c.zcQ.Push(f)
			continue
		}
		t.frameWritten(f)
	}
	return nil
}

func (t *Transport) frameWritten(f *frame) {
	if r := f.req; r != nil {
		r.Pending--
		if r.Pending == 0 {
			t.Finish(r, nil)
		}
	}
	t.freeFrames.Put(f)
}

// reap collects MSG_ZEROCOPY completions and finishes the frames whose
// pages the kernel has released.
func (c *conn) reap() (bool, error) {
	moved := false
	for {
		_, hi, _, ok, err := c.snd.Completions()
		if err != nil {
			return true, c.wrap(err)
		}
		if !ok {
			break
		}
		if int32(hi+1-c.zcOK) > 0 {
			c.zcOK = hi + 1
		}
	}
	for c.zcQ.Len() > 0 && int32(c.zcQ.Front().zcLast-c.zcOK) < 0 {
		c.t.frameWritten(c.zcQ.Pop())
		moved = true
	}
	return moved, nil
}

// stripe queues a rendezvous payload of n bytes over the connections.
func (t *Transport) stripe(r *request, n int) {
	p := t.peers[r.Rank]
	if n == 0 {
		t.Finish(r, nil)
		return
	}
	parts := min(t.params.Conns, (n+minStripe-1)/minStripe)
	size := (n + parts - 1) / parts
	r.Pending = 0
	for off := 0; off < n; off += size {
		l := min(size, n-off)
		c := p.conns[(off/size)%len(p.conns)]
		c.out.Push(t.newFrame(kData, r.Seq, l, off, r.Buf[off:off+l], r))
		r.Pending++
	}
	for _, c := range p.conns {
		if c.out.Len() > 0 {
			if err := c.flush(); err != nil {
				t.fail(p, err)
				return
			}
		}
	}
}
