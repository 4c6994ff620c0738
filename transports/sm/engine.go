package sm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

// Cell kinds.
const (
	kindEager uint8 = iota + 1 // payload inline
	kindFrag                   // payload in the next fragment slot; word 0 = message size
	kindRTS                    // rendezvous request: size, sender address, sender request id
	kindCTS                    // push rendezvous: sender id, receiver id, receiver address
	kindFIN                    // rendezvous completion: request id, status
)

const ctrlPayload = 32 // four little-endian words

// SingleCopy is a mechanism that moves a rendezvous message with one copy
// between address spaces (CMA, XPMEM, KNEM, ...).
type SingleCopy interface {
	Name() string
	// Pull reports whether the receiver reads (true) or the sender writes.
	Pull() bool
	// Rendezvous reports whether a message of n bytes, larger than the
	// eager limit, moves by single copy (else it is pipelined). Both sides
	// of a channel must answer alike.
	Rendezvous(n int) bool
	// Copy reads process pid's memory at remote into local (pull) or writes
	// local there (push).
	Copy(pid int, local []byte, remote uintptr, pull bool) error
}

type proto uint8

const (
	protoEager proto = iota
	protoPipeline
	protoRendezvous
)

type request struct {
	ep      *Endpoint
	peer    *peer
	buf     []byte
	isSend  bool
	proto   proto
	off     int    // bytes moved so far (pipeline)
	id      uint64 // rendezvous id
	done    bool
	n       int
	err     error
	waiting bool // rendezvous control sent, completion pending
}

func (r *request) Done() bool { return r.done }
func (r *request) Len() int   { return r.n }
func (r *request) Err() error { return r.err }

func (r *request) complete(n int, err error) {
	r.n, r.err, r.done = n, err, true
}

// unexpected is a message that arrived before its receive was posted.
type unexpected struct {
	data     []byte // eager or pipelined payload (heap copy)
	got      int    // bytes of data arrived so far
	complete bool
	rts      bool // a rendezvous request: data is nil
	size     int
	addr     uintptr
	id       uint64
	req      *request // receive matched while still arriving
}

// newUnexpected returns a cleared entry whose data holds size bytes, reusing
// released entries and their buffers: with the collector off in ranks, a
// fresh allocation per early message would grow the heap without bound.
func (e *Endpoint) newUnexpected(size int) *unexpected {
	var u *unexpected
	if k := len(e.unexpFree); k > 0 {
		u = e.unexpFree[k-1]
		e.unexpFree = e.unexpFree[:k-1]
		*u = unexpected{data: u.data[:0]}
	} else {
		u = new(unexpected)
	}
	if cap(u.data) < size {
		u.data = make([]byte, size)
	}
	u.data, u.size = u.data[:size], size
	return u
}

func (e *Endpoint) freeUnexpected(u *unexpected) { e.unexpFree = append(e.unexpFree, u) }

// incoming is a pipelined message whose fragments are still arriving.
type incoming struct {
	active bool
	size   int
	req    *request    // destination: a posted receive, or
	unx    *unexpected // an unexpected-queue entry
}

type ctrlMsg struct {
	kind  uint8
	words [4]uint64
}

type peer struct {
	rank  int
	pid   int
	tx    producer
	rx    consumer
	ctrl  queue[ctrlMsg]
	sendq queue[*request]
	recvq queue[*request]
	unexp queue[*unexpected]
	cur   incoming
}

// Endpoint is one rank's end of the sm transport.
type Endpoint struct {
	name      string
	rank      int
	params    Params
	single    SingleCopy
	peers     []*peer // indexed by rank; nil for self
	active    []*peer // the non-nil peers
	rndv      map[uint64]*request
	nextID    uint64
	free      []*request
	unexpFree []*unexpected
	abort     atomic.Pointer[error] // set by Abort; terminal
	copy      func(dst, src []byte) int
}

// New attaches rank env.Rank to the channels in env.Segment. single may be
// nil (copy-in/copy-out only).
func New(env transports.Env, p Params, single SingleCopy, name string) (*Endpoint, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if len(env.PIDs) != env.Size {
		return nil, fmt.Errorf("sm: %d pids for %d ranks", len(env.PIDs), env.Size)
	}
	e := &Endpoint{name: name, rank: env.Rank, params: p, single: single,
		peers: make([]*peer, env.Size), rndv: map[uint64]*request{}, copy: copyRoutine(p.Copy)}
	for r := 0; r < env.Size; r++ {
		if r == env.Rank {
			continue
		}
		out, err := openChannel(env.Segment, env.Rank, r, env.Size, p)
		if err != nil {
			return nil, err
		}
		in, err := openChannel(env.Segment, r, env.Rank, env.Size, p)
		if err != nil {
			return nil, err
		}
		pr := &peer{rank: r, pid: env.PIDs[r], tx: producer{channel: out}, rx: consumer{channel: in}}
		e.peers[r] = pr
		e.active = append(e.active, pr)
	}
	return e, nil
}

// Name is the transport name the endpoint was registered under.
func (e *Endpoint) Name() string { return e.name }

// Params returns the channel parameters in force.
func (e *Endpoint) Params() Params { return e.params }

// Close delivers queued control cells (a peer may be waiting on a
// completion) and fails if requests are still outstanding. The segment itself
// belongs to the rank runtime.
func (e *Endpoint) Close() error {
	if err := e.abort.Load(); err != nil {
		return *err
	}
	// A rendezvous nobody will receive must still release its sender.
	var unreceived []error
	for _, p := range e.active {
		if n := p.unexp.len(); n > 0 {
			unreceived = append(unreceived, fmt.Errorf("%s: close with %d unreceived messages from rank %d", e.name, n, p.rank))
		}
		for p.unexp.len() > 0 {
			if u := p.unexp.pop(); u.rts {
				e.queueCtrl(p, kindFIN, u.id, finFailed, 0, 0)
			}
		}
	}
	e.flushCtrl()
	if len(unreceived) > 0 {
		return errors.Join(unreceived...)
	}
	for _, p := range e.active {
		if p.sendq.len()+p.recvq.len() > 0 || p.cur.active {
			return fmt.Errorf("%s: close with %d sends and %d receives outstanding to rank %d", e.name, p.sendq.len(), p.recvq.len(), p.rank)
		}
	}
	if len(e.rndv) > 0 {
		return fmt.Errorf("%s: close with %d rendezvous outstanding", e.name, len(e.rndv))
	}
	return nil
}

func (e *Endpoint) ctrlPending() bool {
	for _, p := range e.active {
		if p.ctrl.len() > 0 {
			return true
		}
	}
	return false
}

func (e *Endpoint) peer(r int) (*peer, error) {
	if r < 0 || r >= len(e.peers) || e.peers[r] == nil {
		return nil, fmt.Errorf("%s: no peer rank %d", e.name, r)
	}
	return e.peers[r], nil
}

func (e *Endpoint) protoFor(n int) proto {
	switch {
	case n <= e.params.EagerLimit:
		return protoEager
	case e.single != nil && e.single.Rendezvous(n):
		return protoRendezvous
	default:
		return protoPipeline
	}
}

func (e *Endpoint) newRequest(p *peer, buf []byte, send bool) *request {
	var r *request
	if k := len(e.free); k > 0 {
		r = e.free[k-1]
		e.free = e.free[:k-1]
		*r = request{}
	} else {
		r = new(request)
	}
	r.ep, r.peer, r.buf, r.isSend = e, p, buf, send
	return r
}

// recycle makes a finished request reusable, except after an abort, when
// queues may still point at it.
func (e *Endpoint) recycle(r *request) {
	if e.abort.Load() == nil {
		e.free = append(e.free, r)
	}
}

// Send blocks until buf may be reused.
func (e *Endpoint) Send(to int, buf []byte) error {
	p, err := e.peer(to)
	if err != nil {
		return err
	}
	// Fast path: nothing queued ahead and room for an eager cell.
	if len(buf) <= e.params.EagerLimit && p.sendq.len() == 0 && p.ctrl.len() == 0 && p.tx.cellFree() {
		copy(p.tx.cell(), buf)
		p.tx.publish(kindEager, len(buf))
		return nil
	}
	r := e.isend(p, buf)
	e.waitOne(r)
	err = r.err
	e.recycle(r)
	return err
}

// Recv blocks until a message from peer has arrived in buf.
func (e *Endpoint) Recv(from int, buf []byte) (int, error) {
	p, err := e.peer(from)
	if err != nil {
		return 0, err
	}
	// Fast path for two ranks: nothing pending, poll the one channel.
	if len(e.active) == 1 && p.recvq.len() == 0 && p.unexp.len() == 0 && !p.cur.active && p.sendq.len() == 0 && p.ctrl.len() == 0 {
		for spin := 0; ; spin++ {
			h := p.rx.peek()
			if h == nil {
				if err := e.idle(spin); err != nil {
					return 0, err
				}
				continue
			}
			if h.kind == kindEager && int(h.length) <= len(buf) {
				n := int(h.length)
				copy(buf, p.rx.body()[:n])
				p.rx.release()
				return n, nil
			}
			break
		}
	}
	r := e.irecv(p, buf)
	e.waitOne(r)
	n, err := r.n, r.err
	e.recycle(r)
	return n, err
}

// idle backs off a polling loop that made no progress: now and then it
// yields the CPU, so oversubscribed ranks still advance, and checks for an
// abort.
func (e *Endpoint) idle(spin int) error {
	if spin >= tightSpins {
		sys.CPURelax()
	}
	if spin&255 != 255 {
		return nil
	}
	if err := e.abort.Load(); err != nil {
		return *err
	}
	if spin&4095 == 4095 {
		sys.Yield()
	}
	return nil
}

// tightSpins is how long a waiter polls flat out before pausing between
// polls: long enough to cover a round trip, short enough that a waiter
// does not starve a hyper-thread sibling doing the copying.
const tightSpins = 128

// Abort makes every wait in progress, and every later one, fail with err.
// It may be called from any goroutine; the endpoint is unusable afterwards.
// It is how a supervisor stops a rank whose peer is gone.
func (e *Endpoint) Abort(err error) { e.abort.Store(&err) }

// Isend starts a send.
func (e *Endpoint) Isend(to int, buf []byte) (transports.Request, error) {
	p, err := e.peer(to)
	if err != nil {
		return nil, err
	}
	return e.isend(p, buf), nil
}

func (e *Endpoint) isend(p *peer, buf []byte) *request {
	r := e.newRequest(p, buf, true)
	r.proto = e.protoFor(len(buf))
	p.sendq.push(r)
	e.progressSend(p)
	return r
}

// Irecv posts a receive.
func (e *Endpoint) Irecv(from int, buf []byte) (transports.Request, error) {
	p, err := e.peer(from)
	if err != nil {
		return nil, err
	}
	return e.irecv(p, buf), nil
}

func (e *Endpoint) irecv(p *peer, buf []byte) *request {
	r := e.newRequest(p, buf, false)
	if p.unexp.len() == 0 {
		p.recvq.push(r)
		e.progressRecv(p)
		return r
	}
	u := p.unexp.pop()
	switch {
	case u.rts:
		e.startRendezvousRecv(p, r, u.size, u.addr, u.id)
		e.freeUnexpected(u)
	case u.complete:
		n := copy(r.buf, u.data)
		r.complete(n, truncated(u.size, len(r.buf)))
		e.freeUnexpected(u)
	default: // still arriving: finish (and free) when the last fragment lands
		u.req = r
	}
	return r
}

func truncated(size, capacity int) error {
	if size > capacity {
		return fmt.Errorf("%w: %d-byte message into %d-byte buffer", transports.ErrTruncated, size, capacity)
	}
	return nil
}

// Wait drives progress until all requests complete, then recycles them: a
// request must not be used after Wait returns.
func (e *Endpoint) Wait(reqs ...transports.Request) error {
	var first error
	for _, q := range reqs {
		r, ok := q.(*request)
		if !ok || r.ep != e {
			return fmt.Errorf("%s: foreign request %T", e.name, q)
		}
		e.waitOne(r)
		if r.err != nil && first == nil {
			first = r.err
		}
	}
	for _, q := range reqs {
		e.recycle(q.(*request))
	}
	return first
}

func (e *Endpoint) waitOne(r *request) {
	progress := e.Progress
	if r.isSend && e.params.NoDrainOnSend {
		progress = e.progressSendsOnly // hazard H5's unsafe variant
	}
	for spin := 0; !r.done; spin++ {
		if !progress() {
			if err := e.idle(spin); err != nil {
				r.complete(0, err)
				return
			}
		}
	}
	e.flushCtrl()
}

// flushCtrl delivers every queued control cell. A completed operation may
// still owe its peer a completion (a push FIN, a pull FIN behind a full
// ring); returning before it is delivered would leave the peer waiting on a
// rank that has moved on.
func (e *Endpoint) flushCtrl() {
	for spin := 0; e.ctrlPending(); spin++ {
		if !e.Progress() && e.idle(spin) != nil {
			return
		}
	}
}

// Progress advances every channel once and reports whether anything moved.
func (e *Endpoint) Progress() bool {
	moved := false
	for _, p := range e.active {
		if e.progressRecv(p) {
			moved = true
		}
		if e.progressSend(p) {
			moved = true
		}
	}
	return moved
}

// progressSendsOnly advances outgoing traffic and leaves incoming channels
// alone (see Params.NoDrainOnSend).
func (e *Endpoint) progressSendsOnly() bool {
	moved := false
	for _, p := range e.active {
		if e.progressSend(p) {
			moved = true
		}
	}
	return moved
}

func (e *Endpoint) progressSend(p *peer) bool {
	moved := false
	for p.ctrl.len() > 0 && p.tx.cellFree() {
		c := p.ctrl.pop()
		putWords(p.tx.cell(), c.words[:])
		p.tx.publish(c.kind, ctrlPayload)
		moved = true
	}
	if p.ctrl.len() > 0 {
		return moved
	}
	for p.sendq.len() > 0 {
		r := p.sendq.front()
		switch r.proto {
		case protoEager:
			if !p.tx.cellFree() {
				return moved
			}
			copy(p.tx.cell(), r.buf)
			p.tx.publish(kindEager, len(r.buf))
			r.complete(len(r.buf), nil)
		case protoPipeline:
			for r.off < len(r.buf) && p.tx.cellFree() && p.tx.fragFree() {
				n := e.copy(p.tx.nextFrag(), r.buf[r.off:])
				p.tx.publishFrag(n, len(r.buf))
				r.off += n
				moved = true
			}
			if r.off < len(r.buf) {
				return moved
			}
			r.complete(len(r.buf), nil)
		case protoRendezvous:
			if !p.tx.cellFree() {
				return moved
			}
			e.nextID++
			r.id, r.waiting = e.nextID, true
			e.rndv[r.id] = r
			putWords(p.tx.cell(), []uint64{uint64(len(r.buf)), uint64(addressOf(r.buf)), r.id, 0})
			p.tx.publish(kindRTS, ctrlPayload)
		}
		p.sendq.pop()
		moved = true
	}
	return moved
}

func (e *Endpoint) progressRecv(p *peer) bool {
	moved := false
	for {
		h := p.rx.peek()
		if h == nil {
			return moved
		}
		moved = true
		body := p.rx.body()
		switch h.kind {
		case kindCTS:
			w := getWords(body)
			p.rx.release()
			e.pushRendezvous(p, w[0], w[1], uintptr(w[2]), int(w[3]))
		case kindFIN:
			w := getWords(body)
			p.rx.release()
			e.finishRendezvous(w[0], w[1])
		case kindEager:
			n := int(h.length)
			if r := e.matchNew(p); r != nil {
				r.complete(copy(r.buf, body[:n]), truncated(n, len(r.buf)))
			} else {
				u := e.newUnexpected(n)
				u.got, u.complete = copy(u.data, body[:n]), true
				p.unexp.push(u)
			}
			p.rx.release()
		case kindRTS:
			w := getWords(body)
			p.rx.release()
			size, addr, id := int(w[0]), uintptr(w[1]), w[2]
			if r := e.matchNew(p); r != nil {
				e.startRendezvousRecv(p, r, size, addr, id)
			} else {
				u := e.newUnexpected(0)
				u.rts, u.size, u.addr, u.id = true, size, addr, id
				p.unexp.push(u)
			}
		case kindFrag:
			e.receiveFragment(p, int(h.length), int(binary.LittleEndian.Uint64(body)))
		default:
			panic(fmt.Sprintf("%s: corrupt channel %d->%d: cell kind %d", e.name, p.rank, e.rank, h.kind))
		}
	}
}

// matchNew pops the posted receive for a newly arriving message, or nil.
func (e *Endpoint) matchNew(p *peer) *request {
	if p.recvq.len() == 0 {
		return nil
	}
	return p.recvq.pop()
}

func (e *Endpoint) receiveFragment(p *peer, n, size int) {
	if !p.cur.active {
		p.cur = incoming{active: true, size: size}
		if r := e.matchNew(p); r != nil {
			p.cur.req = r
		} else {
			p.cur.unx = e.newUnexpected(size)
			p.unexp.push(p.cur.unx)
		}
	}
	in := &p.cur
	src := p.rx.curFrag()[:n]
	if in.req != nil {
		e.copy(in.req.buf[min(in.req.off, len(in.req.buf)):], src)
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
		p.cur = incoming{}
	case in.unx != nil && in.unx.got >= in.size:
		in.unx.complete = true
		if r := in.unx.req; r != nil {
			r.complete(copy(r.buf, in.unx.data), truncated(in.size, len(r.buf)))
			e.freeUnexpected(in.unx)
		}
		p.cur = incoming{}
	}
}

// FIN status words.
const (
	finOK     = 0
	finFailed = 1
)

// startRendezvousRecv moves a matched rendezvous message. As with the
// other protocols, a message longer than the buffer fills the buffer and
// the receive fails with ErrTruncated; the sender completes normally.
func (e *Endpoint) startRendezvousRecv(p *peer, r *request, size int, addr uintptr, sendID uint64) {
	n := min(size, len(r.buf))
	if e.single.Pull() {
		err := e.single.Copy(p.pid, r.buf[:n], addr, true)
		status := uint64(finOK)
		if err != nil {
			status = finFailed
			err = fmt.Errorf("%s rendezvous from rank %d: %w", e.name, p.rank, err)
		} else {
			err = truncated(size, len(r.buf))
		}
		r.complete(n, err)
		e.queueCtrl(p, kindFIN, sendID, status, 0, 0)
		return
	}
	e.nextID++
	r.id, r.waiting, r.n = e.nextID, true, size
	e.rndv[r.id] = r
	e.queueCtrl(p, kindCTS, sendID, r.id, uint64(addressOf(r.buf)), uint64(len(r.buf)))
}

func (e *Endpoint) pushRendezvous(p *peer, sendID, recvID uint64, addr uintptr, capacity int) {
	r := e.rndv[sendID]
	if r == nil {
		panic(fmt.Sprintf("%s: clear-to-send for unknown request %d", e.name, sendID))
	}
	delete(e.rndv, sendID)
	err := e.single.Copy(p.pid, r.buf[:min(len(r.buf), capacity)], addr, false)
	status := uint64(finOK)
	if err != nil {
		status = finFailed
		err = fmt.Errorf("%s rendezvous to rank %d: %w", e.name, p.rank, err)
	}
	r.complete(len(r.buf), err)
	e.queueCtrl(p, kindFIN, recvID, status, 0, 0)
}

// queueCtrl sends a control cell now if the ring has room, else queues it
// ahead of all data for the next progress call.
func (e *Endpoint) queueCtrl(p *peer, kind uint8, w0, w1, w2, w3 uint64) {
	p.ctrl.push(ctrlMsg{kind: kind, words: [4]uint64{w0, w1, w2, w3}})
	e.progressSend(p)
}

func (e *Endpoint) finishRendezvous(id, status uint64) {
	r := e.rndv[id]
	if r == nil {
		panic(fmt.Sprintf("%s: completion for unknown request %d", e.name, id))
	}
	delete(e.rndv, id)
	if status != finOK {
		r.complete(0, fmt.Errorf("%s: peer rank %d failed the single copy", e.name, r.peer.rank))
		return
	}
	if r.isSend {
		r.complete(len(r.buf), nil)
		return
	}
	// A pushed receive: r.n holds the message size from the RTS.
	r.complete(min(r.n, len(r.buf)), truncated(r.n, len(r.buf)))
}

func copyRoutine(name string) func(dst, src []byte) int {
	switch name {
	case "movsb":
		return sys.CopyMovsb
	case "auto":
		return func(dst, src []byte) int {
			if len(src) >= MoveStringMin {
				return sys.CopyMovsb(dst, src)
			}
			return copy(dst, src)
		}
	default:
		return func(dst, src []byte) int { return copy(dst, src) }
	}
}

func putWords(b []byte, w []uint64) {
	for i, v := range w {
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
}

func getWords(b []byte) (w [4]uint64) {
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return w
}

func addressOf(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return sys.AddressOf(b)
}
