package ib

import (
	"errors"
	"fmt"
	"time"

	"github.com/gotune/gotune/internal/queue"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/verbs"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/msgengine"
)

// No shared segment: queue pairs are connected through
// transports.Env.AllGather; options are checked before ranks start.
func init() { transports.Register(msgengine.Driver("ib", Options, ParseParams, New, Check)) }

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

// Transport is one rank's ib endpoint, driven by one goroutine. The
// embedded engine numbers, matches and completes the requests; the
// transport moves their messages and payloads.
type Transport struct {
	engine
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

	peers []*peer
	wcs   [16]verbs.WC
}

type engine = msgengine.Engine[request, *request, *arrival]

type peer struct {
	msgengine.Peer[*request, *arrival]
	qp *verbs.QP
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
	// rendezvous sends: read, waiting for FIN; write, for CTS, then for
	// the writes (rendezvous receives, in Peer.RndvRecv: read, waiting for
	// the reads; write, for FIN)
	rndvSend []*request
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

// request is a send or receive; Pending counts its RDMA chunks
// outstanding.
type request struct {
	msgengine.Request
	ent *regEntry // the registration of its buffer, while it needs one
}

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
	h := msgengine.Hooks[*request, *arrival]{Start: t.start, Match: t.match, Progress: t.progress, Release: t.release}
	if p.Wait == "event" {
		h.Sleep = t.sleep
	}
	t.Init("ib", env.Rank, env.Size, p.Eager, h)
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

// Close waits (a bounded time) for the send queues to drain, then
// destroys the queue pairs and releases every resource.
func (t *Transport) Close() error {
	if t.Shut() {
		return nil
	}
	deadline := time.Now().Add(2 * time.Second)
	for t.cq != nil && time.Now().Before(deadline) {
		busy := false
		for _, p := range t.peers {
			if p != nil && p.Err == nil && (p.sqFree < t.params.Depth || p.queue.Len() > 0) {
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
	return msgengine.Check("ib", tr, env, ring)
}

// ring is Check on an ib transport.
func ring(t *Transport, env transports.Env) error {
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
		prev, err := t.Ring(env, out[:n], in[:n])
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if in[i] != byte(i*7+prev) {
				return fmt.Errorf("ib check: byte %d of %d from rank %d differs", i, n, prev)
			}
		}
	}
	return nil
}
