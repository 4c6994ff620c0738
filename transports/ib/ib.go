package ib

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gotune/gotune/internal/queue"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/verbs"
	"github.com/gotune/gotune/transports"
)

func init() {
	transports.Register(&transports.Driver{
		Name:    "ib",
		Options: []*transports.OptionSet{Options},
		// No shared segment: queue pairs are connected through
		// transports.Env.AllGather; options are checked before ranks start.
		SharedBytes: func(size int, o transports.Options) (int, error) {
			_, err := ParseParams(o)
			return 0, err
		},
		New:   New,
		Check: Check,
	})
}

// Message kinds (the first byte of a slot's header).
const (
	kEager    = 1 // header, then len payload bytes
	kRTS      = 2 // request to send len bytes; read mode: addr and rkey of the sender's buffer
	kCTS      = 3 // write mode, clear to send: the receiver takes len bytes at addr/rkey
	kFINRead  = 4 // read mode: the receiver has read message seq (the sender's buffer is free)
	kFINWrite = 5 // write mode: the sender has written message seq
)

// Rendezvous modes carried by an RTS: the receiver follows the sender's.
const (
	modeRead  = 1
	modeWrite = 2
)

// hdrLen is a slot's header: kind u8, mode u8, 2 bytes zero, seq u32,
// len u64, addr u64, rkey u32, credits u32 (the sender's count of the
// receiver's slots it has reposted: credits returned, piggybacked).
const hdrLen = 32

// Work request ids: type in the top byte, peer rank, then an index.
const (
	wRecv   = 1 // index: the peer's receive slot
	wSend   = 2 // index: a send slot
	wRead   = 3 // index: message seq
	wWrite  = 4 // index: message seq
	wCredit = 5 // RDMA write of the credit count
)

func wrID(typ, peer int, idx uint32) uint64 {
	return uint64(typ)<<56 | uint64(peer)<<32 | uint64(idx)
}

func splitID(id uint64) (typ, peer int, idx uint32) {
	return int(id >> 56), int(id>>32) & 0xffffff, uint32(id)
}

// ctrlBytes per peer in the control area: the credit count the peer
// writes into ours (u32 at 0) and the count we write into its (u32 at 8).
const ctrlBytes = 16

// Transport is one rank's ib endpoint, driven by one goroutine.
type Transport struct {
	rank, size int
	params     Params
	env        transports.Env
	dev        string
	port       int
	gidIndex   int
	mtu        verbs.MTU
	maxMsg     int

	ctx  *verbs.Context
	pd   *verbs.PD
	ch   *verbs.Channel
	cq   *verbs.CQ
	mem  []byte // receive slots, send slots, control words
	mr   *verbs.MR
	reg  *regCache
	slot int // bytes a slot

	peers  []*peer
	wcs    [16]verbs.WC
	free   []*request
	bufs   [][]byte // eager copies of unexpected messages, recycled
	closed bool
}

type peer struct {
	rank int
	qp   *verbs.QP
	// credits
	sent, returned uint32 // messages sent into the peer's slots; slots it says it has reposted
	reposted, told uint32 // the peer's messages taken out of our slots; the count we last told it
	creditBusy     bool   // an RDMA write of our count is in flight
	remoteCtrl     uint64 // where our count goes in the peer's control area
	remoteCtrlKey  uint32
	// send slots and queue
	sendFree []uint32
	sqFree   int
	queue    queue.FIFO[op] // in order: waiting for a credit, a slot or a send queue entry
	// matching
	sendSeq, recvSeq uint32
	posted           queue.FIFO[*request]
	unexpected       queue.FIFO[*arrival]
	rndvSend         []*request // read: waiting for FIN; write: for CTS, then for the writes
	rndvRecv         []*request // read: waiting for the reads; write: for FIN
	err              error
}

// arrival is a message that came before its receive was posted.
type arrival struct {
	kind byte
	mode byte
	seq  uint32
	len  int
	addr uint64
	rkey uint32
	data []byte // eager payload
}

type request struct {
	t       *Transport
	peer    *peer
	buf     []byte
	send    bool
	rndv    bool
	seq     uint32
	n       int // bytes moved
	msgLen  int // the message's length (receive)
	pending int // RDMA chunks outstanding
	ent     *regEntry
	done    bool
	err     error
}

func (r *request) Done() bool { return r.done }
func (r *request) Len() int   { return r.n }
func (r *request) Err() error { return r.err }

// op is a work request waiting its turn on a peer's send queue.
type op struct {
	kind    byte // a message kind, or 0 for an RDMA operation
	mode    byte
	seq     uint32
	len     uint64
	addr    uint64
	rkey    uint32
	payload []byte   // eager: copied into the slot when posted
	req     *request // eager send: completes when posted
	// RDMA read or write
	rdma  verbs.Opcode
	laddr uintptr
	llen  int
	lkey  uint32
}

// New opens the device, creates a queue pair per peer, exchanges
// connection information through env.AllGather and connects.
func New(env transports.Env) (transports.Transport, error) {
	p, err := ParseParams(env.Options)
	if err != nil {
		return nil, err
	}
	if env.AllGather == nil {
		return nil, errors.New("ib: the job offers no allgather (transports.Env.AllGather) to exchange queue pair numbers")
	}
	t := &Transport{rank: env.Rank, size: env.Size, params: p, env: env, peers: make([]*peer, env.Size)}
	if err := t.open(); err != nil {
		t.Close()
		return nil, err
	}
	if err := t.connect(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func (t *Transport) Name() string { return "ib" }

// Device says which device, port, GID index and MTU the transport uses.
func (t *Transport) Device() string {
	return fmt.Sprintf("%s port %d GID %d MTU %d", t.dev, t.port, t.gidIndex, t.mtu.Bytes())
}

// RegStats reports the registration cache's counters.
func (t *Transport) RegStats() RegStats { return t.reg.Stats() }

// Invalidate drops registrations of [addr, addr+n) before the next use:
// call it (or hook it to an allocator's release, hostmem.Allocator.OnRelease)
// before memory that was sent from or received into goes back to the
// kernel. Safe from any goroutine; it never takes the cache's lock.
func (t *Transport) Invalidate(addr uintptr, n int) { t.reg.Invalidate(addr, n) }

// open picks and opens the device, port and GID and creates the
// resources every peer shares.
func (t *Transport) open() error {
	p := t.params
	devs, err := verbs.Discover(os.DirFS(verbs.SysfsRoot))
	if err != nil {
		return fmt.Errorf("ib: %w", err)
	}
	var view verbs.NetView
	if p.Dev == "" {
		view, _ = verbs.LocalNetView() // no view: the first active device, as without namespaces
	}
	dev, port, have := pickPort(devs, p, view)
	if port == nil {
		what := "no device with an active port"
		if p.Dev != "" || p.Port != 0 {
			what = fmt.Sprintf("no device ib.dev=%q with port ib.port=%d", p.Dev, p.Port)
		}
		return sys.NotSupported("ib", fmt.Sprintf("%s (have %v)", what, have), nil)
	}
	t.dev = dev
	if port.State != "ACTIVE" {
		return sys.NotSupported("ib", fmt.Sprintf("%s port %d is %s", t.dev, port.Num, port.State), nil)
	}
	t.port, t.gidIndex = port.Num, p.GID
	if t.gidIndex < 0 {
		if port.Chosen < 0 {
			return sys.NotSupported("ib", fmt.Sprintf("%s port %d: %s", t.dev, port.Num, port.Why), nil)
		}
		t.gidIndex = port.Chosen
	}
	if t.ctx, err = verbs.Open(t.dev); err != nil {
		return fmt.Errorf("ib: %w", err)
	}
	pa, err := t.ctx.QueryPort(t.port)
	if err != nil {
		return fmt.Errorf("ib: %w", err)
	}
	t.mtu = pa.ActiveMTU
	if p.MTU != 0 {
		m, _ := verbs.MTUOf(p.MTU)
		if m > pa.ActiveMTU {
			return fmt.Errorf("ib: ib.mtu=%d is above %s port %d's active MTU %d", p.MTU, t.dev, t.port, pa.ActiveMTU.Bytes())
		}
		t.mtu = m
	}
	t.maxMsg = min(int(pa.MaxMsg), 1<<30)
	if t.maxMsg <= 0 {
		t.maxMsg = 1 << 30
	}
	if t.pd, err = t.ctx.AllocPD(); err != nil {
		return fmt.Errorf("ib: %w", err)
	}
	if p.Wait == "event" {
		if t.ch, err = t.ctx.NewChannel(); err != nil {
			return fmt.Errorf("ib: %w", err)
		}
	}
	npeers := max(t.size-1, 1)
	if t.cq, err = t.ctx.NewCQ(npeers*(p.Credits+p.Depth)+16, t.ch); err != nil {
		return fmt.Errorf("ib: %w", err)
	}
	t.slot = sys.RoundUp(hdrLen+p.Eager, 64)
	total := sys.RoundUp(2*t.size*p.Credits*t.slot+t.size*ctrlBytes, sys.PageSize)
	if t.mem, err = sys.MapAnon(total, true); err != nil {
		return fmt.Errorf("ib: slots: %w", err)
	}
	if t.mr, err = t.pd.Register(sys.AddressOf(t.mem), len(t.mem), verbs.LocalWrite|verbs.RemoteWrite); err != nil {
		return fmt.Errorf("ib: register %d bytes of slots: %w", len(t.mem), err)
	}
	pd := t.pd
	t.reg = newRegCache(func(addr uintptr, n int) (region, error) {
		m, err := pd.Register(addr, n, verbs.LocalWrite|verbs.RemoteRead|verbs.RemoteWrite)
		if err != nil {
			return nil, fmt.Errorf("ib: %w", err)
		}
		return mrRegion{m}, nil
	})
	return nil
}

// pickPort chooses the device and port: ib.dev (and ib.port) when given.
// Otherwise, of the devices with an active port (or port ib.port), the
// first whose GID (ib.gid, or the one discovery chooses) is on an interface
// of the caller's network namespace (view; nil: not known), else the first
// of them. RDMA devices are shared by every namespace, but a RoCE device
// moves data only through its own netdev: ranks in different namespaces,
// as containers or namespace-hosts, each need the device of their own.
// have lists the devices passed over, for an error.
func pickPort(devs []verbs.Device, p Params, view verbs.NetView) (dev string, port *verbs.Port, have []string) {
	type candidate struct {
		dev  string
		port *verbs.Port
	}
	var cands []candidate
	for _, d := range devs {
		var found *verbs.Port
		for i := range d.Ports {
			q := &d.Ports[i]
			if (p.Port == 0 && q.State == "ACTIVE") || q.Num == p.Port {
				found = q
				break
			}
		}
		if (p.Dev != "" && d.Name != p.Dev) || found == nil {
			have = append(have, d.Name)
			continue
		}
		cands = append(cands, candidate{d.Name, found})
	}
	if len(cands) == 0 {
		return "", nil, have
	}
	if p.Dev == "" && view != nil {
		for _, c := range cands {
			idx := p.GID
			if idx < 0 {
				idx = c.port.Chosen
			}
			if c.port.InView(idx, view) {
				return c.dev, c.port, have
			}
		}
	}
	return cands[0].dev, cands[0].port, have
}

type mrRegion struct{ m *verbs.MR }

func (r mrRegion) Keys() (uint32, uint32) { return r.m.LKey, r.m.RKey }
func (r mrRegion) Close() error           { return r.m.Close() }

// Slot addresses.
func (t *Transport) recvSlot(peer int, i uint32) []byte {
	o := (peer*t.params.Credits + int(i)) * t.slot
	return t.mem[o : o+t.slot]
}

func (t *Transport) sendSlot(peer int, i uint32) []byte {
	o := ((t.size+peer)*t.params.Credits + int(i)) * t.slot
	return t.mem[o : o+t.slot]
}

func (t *Transport) ctrl(peer int) []byte {
	o := 2 * t.size * t.params.Credits * t.slot
	return t.mem[o+peer*ctrlBytes : o+(peer+1)*ctrlBytes]
}

// Connection blob: magic, version, then the rank's port and resources,
// then its queue pair number for every rank.
const (
	blobMagic   = 0x42495447 // "GTIB"
	blobVersion = 1
	blobHead    = 64
)

type connInfo struct {
	lid     uint16
	mtu     verbs.MTU
	ib      bool // InfiniBand link layer: route by LID
	gid     verbs.GID
	psn     uint32
	ctrl    uint64
	ctrlKey uint32
	eager   int
	credits int
	qpn     []uint32
}

func (c *connInfo) marshal() []byte {
	b := make([]byte, blobHead+4*len(c.qpn))
	le := binary.LittleEndian
	le.PutUint32(b[0:], blobMagic)
	le.PutUint16(b[4:], blobVersion)
	le.PutUint16(b[6:], c.lid)
	b[8] = byte(c.mtu)
	if c.ib {
		b[9] = 1
	}
	copy(b[12:28], c.gid[:])
	le.PutUint32(b[28:], c.psn)
	le.PutUint64(b[32:], c.ctrl)
	le.PutUint32(b[40:], c.ctrlKey)
	le.PutUint32(b[44:], uint32(c.eager))
	le.PutUint32(b[48:], uint32(c.credits))
	for i, q := range c.qpn {
		le.PutUint32(b[blobHead+4*i:], q)
	}
	return b
}

func unmarshalConn(b []byte, size int) (connInfo, error) {
	le := binary.LittleEndian
	var c connInfo
	if len(b) != blobHead+4*size || le.Uint32(b) != blobMagic {
		return c, fmt.Errorf("connection info of %d bytes is not gotune ib's for %d ranks", len(b), size)
	}
	if v := le.Uint16(b[4:]); v != blobVersion {
		return c, fmt.Errorf("connection info version %d, want %d (mixed gotune versions?)", v, blobVersion)
	}
	c.lid, c.mtu, c.ib = le.Uint16(b[6:]), verbs.MTU(b[8]), b[9] == 1
	copy(c.gid[:], b[12:28])
	c.psn, c.ctrl, c.ctrlKey = le.Uint32(b[28:]), le.Uint64(b[32:]), le.Uint32(b[40:])
	c.eager, c.credits = int(le.Uint32(b[44:])), int(le.Uint32(b[48:]))
	c.qpn = make([]uint32, size)
	for i := range c.qpn {
		c.qpn[i] = le.Uint32(b[blobHead+4*i:])
	}
	return c, nil
}

// connect creates a queue pair per peer, exchanges connection info and
// moves every queue pair to RTS; a second allgather makes sure every
// peer's queue pair receives before anyone sends.
func (t *Transport) connect() error {
	p := t.params
	pa, err := t.ctx.QueryPort(t.port)
	if err != nil {
		return fmt.Errorf("ib: %w", err)
	}
	gid, err := t.ctx.QueryGID(t.port, t.gidIndex)
	if err != nil {
		return fmt.Errorf("ib: %w", err)
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	me := connInfo{lid: pa.LID, mtu: t.mtu, ib: pa.LinkLayer == "InfiniBand", gid: gid, psn: binary.LittleEndian.Uint32(rnd[:]) & 0xffffff,
		ctrl: uint64(sys.AddressOf(t.ctrl(0))), ctrlKey: t.mr.RKey, eager: p.Eager, credits: p.Credits, qpn: make([]uint32, t.size)}
	for r := 0; r < t.size; r++ {
		if r == t.rank {
			continue
		}
		qp, err := t.pd.NewRCQP(t.cq, t.cq, verbs.QPCaps{SendWR: p.Depth, RecvWR: p.Credits})
		if err != nil {
			return fmt.Errorf("ib: queue pair for rank %d: %w", r, err)
		}
		pe := &peer{rank: r, qp: qp, sqFree: p.Depth}
		t.peers[r] = pe
		me.qpn[r] = qp.Num
		if err := qp.Init(t.port, verbs.LocalWrite|verbs.RemoteRead|verbs.RemoteWrite); err != nil {
			return fmt.Errorf("ib: %w", err)
		}
		for i := 0; i < p.Credits; i++ {
			s := t.recvSlot(r, uint32(i))
			if err := qp.PostRecv(wrID(wRecv, r, uint32(i)), sys.AddressOf(s), len(s), t.mr.LKey); err != nil {
				return fmt.Errorf("ib: %w", err)
			}
			pe.sendFree = append(pe.sendFree, uint32(i))
		}
	}
	all, err := t.env.AllGather(me.marshal())
	if err != nil {
		return fmt.Errorf("ib: exchange connection info: %w", err)
	}
	if len(all) != t.size {
		return fmt.Errorf("ib: exchange connection info: %d blobs for %d ranks", len(all), t.size)
	}
	rd := 16
	if a, err := t.ctx.Query(); err == nil {
		rd = max(1, min(rd, a.MaxQPRdAtom, a.MaxQPInitRdAtom))
	}
	for r, pe := range t.peers {
		if pe == nil {
			continue
		}
		c, err := unmarshalConn(all[r], t.size)
		if err != nil {
			return fmt.Errorf("ib: rank %d: %w", r, err)
		}
		if c.eager != p.Eager || c.credits != p.Credits {
			return fmt.Errorf("ib: rank %d has ib.eager=%d ib.credits=%d, rank %d has %d and %d: every rank must use the same", r, c.eager, c.credits, t.rank, p.Eager, p.Credits)
		}
		pe.remoteCtrl, pe.remoteCtrlKey = c.ctrl+uint64(t.rank*ctrlBytes), c.ctrlKey
		rem := verbs.Remote{QPN: c.qpn[t.rank], PSN: c.psn, LID: c.lid, GID: c.gid, Global: !c.ib, SGID: t.gidIndex, MTU: min(t.mtu, c.mtu), RdAtomic: rd}
		if err := pe.qp.ReadyToReceive(rem); err != nil {
			return fmt.Errorf("ib: connect to rank %d: %w", r, err)
		}
		if err := pe.qp.ReadyToSend(me.psn, rd); err != nil {
			return fmt.Errorf("ib: connect to rank %d: %w", r, err)
		}
	}
	if _, err := t.env.AllGather(nil); err != nil {
		return fmt.Errorf("ib: wait for every rank's queue pairs: %w", err)
	}
	return nil
}

func (t *Transport) peerOf(rank int) (*peer, error) {
	if rank < 0 || rank >= t.size || rank == t.rank {
		return nil, fmt.Errorf("ib: rank %d has no peer %d (job of %d)", t.rank, rank, t.size)
	}
	if t.closed {
		return nil, errors.New("ib: transport closed")
	}
	return t.peers[rank], nil
}

func (t *Transport) newRequest(p *peer, buf []byte, send bool) *request {
	var r *request
	if k := len(t.free); k > 0 {
		r = t.free[k-1]
		t.free = t.free[:k-1]
		*r = request{}
	} else {
		r = new(request)
	}
	r.t, r.peer, r.buf, r.send = t, p, buf, send
	return r
}

// Isend starts sending buf to peer.
func (t *Transport) Isend(peer int, buf []byte) (transports.Request, error) {
	p, err := t.peerOf(peer)
	if err != nil {
		return nil, err
	}
	r := t.newRequest(p, buf, true)
	r.seq = p.sendSeq
	p.sendSeq++
	if p.err != nil {
		t.finish(r, p.err)
		return r, nil
	}
	if len(buf) <= t.params.Eager {
		p.queue.Push(op{kind: kEager, seq: r.seq, len: uint64(len(buf)), payload: buf, req: r})
	} else {
		r.rndv = true
		o := op{kind: kRTS, mode: modeWrite, seq: r.seq, len: uint64(len(buf))}
		if t.params.Rndv == "read" {
			e, err := t.reg.get(sys.AddressOf(buf), len(buf))
			if err != nil {
				t.finish(r, opErr(r, err))
				return r, nil
			}
			r.ent = e
			_, rkey := e.r.Keys()
			o.mode, o.addr, o.rkey = modeRead, uint64(sys.AddressOf(buf)), rkey
		}
		p.queue.Push(o)
		p.rndvSend = append(p.rndvSend, r)
	}
	t.flush(p)
	return r, nil
}

// Irecv posts a receive of the next message from peer into buf.
func (t *Transport) Irecv(peer int, buf []byte) (transports.Request, error) {
	p, err := t.peerOf(peer)
	if err != nil {
		return nil, err
	}
	r := t.newRequest(p, buf, false)
	r.seq = p.recvSeq
	p.recvSeq++
	if p.unexpected.Len() > 0 {
		t.match(r, p.unexpected.Pop())
		return r, nil
	}
	if p.err != nil {
		t.finish(r, p.err)
		return r, nil
	}
	p.posted.Push(r)
	return r, nil
}

// match hands an arrival to its receive.
func (t *Transport) match(r *request, a *arrival) {
	p := r.peer
	r.msgLen = a.len
	switch a.kind {
	case kEager:
		r.n = copy(r.buf, a.data[:a.len])
		if cap(a.data) == t.params.Eager {
			t.bufs = append(t.bufs, a.data[:cap(a.data)])
		}
		t.finishRecv(r)
	case kRTS:
		r.rndv = true
		r.n = min(a.len, len(r.buf))
		if a.mode == modeRead {
			if r.n == 0 {
				p.queue.Push(op{kind: kFINRead, seq: a.seq})
				t.finishRecv(r)
				break
			}
			e, err := t.reg.get(sys.AddressOf(r.buf), r.n)
			if err != nil {
				t.finish(r, opErr(r, err))
				break
			}
			r.ent = e
			lkey, _ := e.r.Keys()
			for off := 0; off < r.n; off += t.maxMsg {
				l := min(t.maxMsg, r.n-off)
				p.queue.Push(op{rdma: verbs.OpRDMARead, seq: a.seq, laddr: sys.AddressOf(r.buf) + uintptr(off), llen: l, lkey: lkey, addr: a.addr + uint64(off), rkey: a.rkey})
				r.pending++
			}
			p.rndvRecv = append(p.rndvRecv, r)
			break
		}
		o := op{kind: kCTS, seq: a.seq, len: uint64(r.n)}
		if r.n > 0 {
			e, err := t.reg.get(sys.AddressOf(r.buf), r.n)
			if err != nil {
				t.finish(r, opErr(r, err))
				break
			}
			r.ent = e
			_, rkey := e.r.Keys()
			o.addr, o.rkey = uint64(sys.AddressOf(r.buf)), rkey
		}
		p.queue.Push(o)
		p.rndvRecv = append(p.rndvRecv, r)
	}
	t.flush(p)
}

func (t *Transport) finishRecv(r *request) {
	var err error
	if r.msgLen > len(r.buf) {
		err = fmt.Errorf("ib: message of %d bytes from rank %d into %d: %w", r.msgLen, r.peer.rank, len(r.buf), transports.ErrTruncated)
	}
	t.finish(r, err)
}

func (t *Transport) finish(r *request, err error) {
	if r.done {
		return
	}
	if r.ent != nil {
		t.reg.put(r.ent)
		r.ent = nil
	}
	r.done, r.err = true, err
	if r.send {
		r.n = len(r.buf)
		if err != nil {
			r.n = 0
		}
	}
}

// flush posts queued work requests in order while the peer has credits,
// send slots and send queue entries for them.
func (t *Transport) flush(p *peer) {
	for p.queue.Len() > 0 && p.err == nil {
		o := p.queue.Front()
		if p.sqFree == 0 {
			return
		}
		if o.kind == 0 { // RDMA read or write
			typ := wRead
			if o.rdma == verbs.OpRDMAWrite {
				typ = wWrite
			}
			err := p.qp.PostSend(verbs.SendWR{ID: wrID(typ, p.rank, o.seq), Op: o.rdma, Addr: o.laddr, Len: o.llen, LKey: o.lkey, RemoteAddr: o.addr, RKey: o.rkey, Signaled: true})
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
		s := t.sendSlot(p.rank, i)
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
		if err := p.qp.PostSend(verbs.SendWR{ID: wrID(wSend, p.rank, i), Op: verbs.OpSend, Addr: sys.AddressOf(s), Len: n, LKey: t.mr.LKey, Signaled: true}); err != nil {
			t.fail(p, err)
			return
		}
		p.sendFree = p.sendFree[:len(p.sendFree)-1]
		p.sqFree--
		p.sent++
		p.told = p.reposted
		if o.req != nil {
			t.finish(o.req, nil) // eager: the payload is in the slot
		}
		p.queue.Pop()
	}
}

// takeCredits reads the count the peer RDMA-wrote into our control area.
func (t *Transport) takeCredits(p *peer) {
	w := (*uint32)(unsafe.Pointer(&t.ctrl(p.rank)[0]))
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
	if owed == 0 || owed < uint32(max(1, t.params.Credits/2)) || p.creditBusy || p.sqFree == 0 || p.err != nil {
		return
	}
	src := t.ctrl(p.rank)[8:12]
	binary.LittleEndian.PutUint32(src, p.reposted)
	if err := p.qp.PostSend(verbs.SendWR{ID: wrID(wCredit, p.rank, 0), Op: verbs.OpRDMAWrite, Addr: sys.AddressOf(src), Len: 4, LKey: t.mr.LKey,
		RemoteAddr: p.remoteCtrl, RKey: p.remoteCtrlKey, Signaled: true}); err != nil {
		t.fail(p, err)
		return
	}
	p.sqFree--
	p.creditBusy = true
	p.told = p.reposted
}

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
		if p == nil || p.err != nil {
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
		if r := find(p.rndvRecv, idx); r != nil {
			r.pending--
			if r.pending == 0 {
				p.rndvRecv = remove(p.rndvRecv, r)
				p.queue.Push(op{kind: kFINRead, seq: idx})
				t.finishRecv(r)
			}
		}
	case wWrite:
		p.sqFree++
		if r := find(p.rndvSend, idx); r != nil {
			r.pending--
			if r.pending == 0 {
				p.rndvSend = remove(p.rndvSend, r)
				t.finish(r, nil)
			}
		}
	case wRecv:
		t.arrive(p, idx, wc.Len)
	}
}

// arrive handles a message in receive slot i and reposts the slot.
func (t *Transport) arrive(p *peer, i uint32, n int) {
	s := t.recvSlot(p.rank, i)
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
		if p.posted.Len() > 0 {
			r := p.posted.Pop()
			r.msgLen = ln
			r.n = copy(r.buf, s[hdrLen:hdrLen+ln])
			t.finishRecv(r)
			break
		}
		a := &arrival{kind: kEager, seq: seq, len: ln, data: t.eagerBuf()}
		copy(a.data, s[hdrLen:hdrLen+ln])
		p.unexpected.Push(a)
	case kRTS:
		a := &arrival{kind: kRTS, mode: mode, seq: seq, len: ln, addr: addr, rkey: rkey}
		if p.posted.Len() > 0 {
			t.match(p.posted.Pop(), a)
		} else {
			p.unexpected.Push(a)
		}
	case kCTS:
		r := find(p.rndvSend, seq)
		if r == nil {
			err = fmt.Errorf("clear-to-send for message %d that is not waiting", seq)
			break
		}
		if ln == 0 {
			p.rndvSend = remove(p.rndvSend, r)
			p.queue.Push(op{kind: kFINWrite, seq: seq})
			t.finish(r, nil)
			break
		}
		e, gerr := t.reg.get(sys.AddressOf(r.buf), ln)
		if gerr != nil {
			err = gerr
			break
		}
		r.ent = e
		lkey, _ := e.r.Keys()
		for off := 0; off < ln; off += t.maxMsg {
			l := min(t.maxMsg, ln-off)
			p.queue.Push(op{rdma: verbs.OpRDMAWrite, seq: seq, laddr: sys.AddressOf(r.buf) + uintptr(off), llen: l, lkey: lkey, addr: addr + uint64(off), rkey: rkey})
			r.pending++
		}
		p.queue.Push(op{kind: kFINWrite, seq: seq})
	case kFINRead:
		r := find(p.rndvSend, seq)
		if r == nil {
			err = fmt.Errorf("read-done for message %d that is not waiting", seq)
			break
		}
		p.rndvSend = remove(p.rndvSend, r)
		t.finish(r, nil)
	case kFINWrite:
		r := find(p.rndvRecv, seq)
		if r == nil {
			err = fmt.Errorf("write-done for message %d that is not waiting", seq)
			break
		}
		p.rndvRecv = remove(p.rndvRecv, r)
		t.finishRecv(r)
	default:
		err = fmt.Errorf("message of unknown kind %d", kind)
	}
	if err != nil {
		t.fail(p, err)
		return
	}
	if perr := p.qp.PostRecv(wrID(wRecv, p.rank, i), sys.AddressOf(s), len(s), t.mr.LKey); perr != nil {
		t.fail(p, perr)
		return
	}
	p.reposted++
	t.flush(p)
}

func (t *Transport) eagerBuf() []byte {
	if k := len(t.bufs); k > 0 {
		b := t.bufs[k-1]
		t.bufs = t.bufs[:k-1]
		return b
	}
	return make([]byte, t.params.Eager)
}

func find(rs []*request, seq uint32) *request {
	for _, r := range rs {
		if r.seq == seq {
			return r
		}
	}
	return nil
}

func remove(rs []*request, r *request) []*request {
	for i, q := range rs {
		if q == r {
			return append(rs[:i], rs[i+1:]...)
		}
	}
	return rs
}

// fail ends every operation with the peer with err.
func (t *Transport) fail(p *peer, err error) {
	if p.err != nil {
		return
	}
	p.err = fmt.Errorf("ib: rank %d with rank %d (%s): %w", t.rank, p.rank, t.dev, err)
	for p.queue.Len() > 0 {
		if o := p.queue.Pop(); o.req != nil {
			t.finish(o.req, opErr(o.req, p.err))
		}
	}
	for _, q := range [][]*request{p.posted.All(), p.rndvSend, p.rndvRecv} {
		for _, r := range q {
			t.finish(r, opErr(r, p.err))
		}
	}
	p.posted.Reset()
	p.rndvSend, p.rndvRecv = nil, nil
}

func opErr(r *request, err error) error {
	op := "eager"
	if r.rndv || len(r.buf) > r.t.params.Eager {
		op = "rendezvous"
	}
	if r.send {
		return fmt.Errorf("%s send of %d bytes to rank %d: %w", op, len(r.buf), r.peer.rank, err)
	}
	return fmt.Errorf("%s receive into %d bytes from rank %d: %w", op, len(r.buf), r.peer.rank, err)
}

// Send is Isend and Wait.
func (t *Transport) Send(peer int, buf []byte) error {
	r, err := t.Isend(peer, buf)
	if err != nil {
		return err
	}
	return t.Wait(r)
}

// Recv is Irecv and Wait; it returns the message's length.
func (t *Transport) Recv(peer int, buf []byte) (int, error) {
	r, err := t.Irecv(peer, buf)
	if err != nil {
		return 0, err
	}
	q := r.(*request)
	err = t.Wait(r)
	return q.n, err
}

// spin is how long Wait polls before it sleeps on the completion
// channel (ib.wait=event).
const spin = 50 * time.Microsecond

// Wait drives progress until every request is done, then recycles them.
func (t *Transport) Wait(reqs ...transports.Request) error {
	var idleSince time.Time
	for {
		all := true
		for _, q := range reqs {
			if !q.(*request).done {
				all = false
				break
			}
		}
		if all {
			break
		}
		if t.progress() {
			idleSince = time.Time{}
			continue
		}
		if t.ch == nil {
			continue
		}
		if idleSince.IsZero() {
			idleSince = time.Now()
			continue
		}
		if time.Since(idleSince) < spin {
			continue
		}
		t.sleep()
	}
	var first error
	for _, q := range reqs {
		r := q.(*request)
		if r.err != nil && first == nil {
			first = r.err
		}
		t.free = append(t.free, r)
	}
	return first
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

// Close waits (a bounded time) for the send queues to drain, then
// destroys the queue pairs and releases every resource.
func (t *Transport) Close() error {
	if t.closed {
		return nil
	}
	deadline := time.Now().Add(2 * time.Second)
	for t.cq != nil && time.Now().Before(deadline) {
		busy := false
		for _, p := range t.peers {
			if p != nil && p.err == nil && (p.sqFree < t.params.Depth || p.queue.Len() > 0) {
				busy = true
			}
		}
		if !busy {
			break
		}
		if !t.progress() {
			time.Sleep(100 * time.Microsecond)
		}
	}
	t.closed = true
	var errs []error
	for _, p := range t.peers {
		if p != nil && p.qp != nil {
			errs = append(errs, p.qp.Close())
		}
	}
	if t.reg != nil {
		t.reg.close()
	}
	if t.mr != nil {
		errs = append(errs, t.mr.Close())
	}
	if t.cq != nil {
		errs = append(errs, t.cq.Close())
	}
	if t.ch != nil {
		errs = append(errs, t.ch.Close())
	}
	if t.pd != nil {
		errs = append(errs, t.pd.Close())
	}
	if t.ctx != nil {
		errs = append(errs, t.ctx.Close())
	}
	if t.mem != nil {
		errs = append(errs, sys.Unmap(t.mem))
	}
	return errors.Join(errs...)
}

// Check proves that every rank reaches every other, eagerly and by
// rendezvous: a ring exchange of a small and a large message.
func Check(tr transports.Transport, env transports.Env) error {
	if env.Size < 2 {
		return nil
	}
	t, ok := tr.(*Transport)
	if !ok {
		return fmt.Errorf("ib check: not an ib transport")
	}
	next, prev := (env.Rank+1)%env.Size, (env.Rank+env.Size-1)%env.Size
	big := max(t.params.Eager+1, 64)
	buf, err := sys.MapAnon(2*big, true)
	if err != nil {
		return err
	}
	defer sys.Unmap(buf)
	defer t.Invalidate(sys.AddressOf(buf), len(buf))
	out, in := buf[:big], buf[big:]
	for i := range out {
		out[i] = byte(i*7 + env.Rank)
	}
	for _, n := range []int{4, big} {
		s, err := t.Isend(next, out[:n])
		if err != nil {
			return err
		}
		r, err := t.Irecv(prev, in[:n])
		if err != nil {
			return err
		}
		if err := t.Wait(s, r); err != nil {
			return fmt.Errorf("ib check: %w", err)
		}
		for i := 0; i < n; i++ {
			if in[i] != byte(i*7+prev) {
				return fmt.Errorf("ib check: byte %d of %d from rank %d differs", i, n, prev)
			}
		}
	}
	return nil
}
