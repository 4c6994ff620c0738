package sm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

// Cell kinds.
const (
	kindEager    uint8 = iota + 1 // payload inline
	kindFrag                      // payload in the fragment ring, length in the header; word 0 = message size, word 1 = message number
	kindRTS                       // rendezvous request: size, sender address, sender request id, sender's Place
	kindCTS                       // push rendezvous: sender id, receiver id, receiver address, capacity
	kindFIN                       // rendezvous completion: request id, status, errno
	kindResend                    // pull receiver could not single-copy: sender id, receiver id, errno
	kindFallback                  // push sender could not single-copy: receiver id, errno
	kindFragTo                    // payload in the fragment ring for receive request word 0
	kindStream                    // receiver routes this one message through the fragments: sender id, receiver id
)

const ctrlPayload = 32 // four little-endian words

// SingleCopy is a mechanism that moves a rendezvous message with one copy
// between address spaces (CMA, XPMEM, KNEM, ...).
//
// A copy that fails with an error matching ErrNotSupported (no permission,
// no kernel support) is not fatal: the engine delivers that message through
// the copy-in/copy-out fragments instead and stops using single copy with
// that peer (Endpoint.Fallbacks says why). Any other error fails the
// message on both sides.
type SingleCopy interface {
	Name() string
	// Pull reports whether the receiver reads (true) or the sender writes.
	Pull() bool
	// Rendezvous reports whether a message of n bytes, larger than the
	// eager limit, moves by single copy (else it is pipelined). Both sides
	// of a channel must answer alike.
	Rendezvous(n int) bool
	// Copy reads process pid's memory at remote into local (pull) or writes
	// local there (push); at is where local lives, as the engine classified
	// it when the request was posted.
	Copy(pid int, local []byte, at Place, remote uintptr, pull bool) error
}

type proto uint8

const (
	protoEager proto = iota
	protoPipeline
	protoRendezvous
	protoFallback // a rendezvous send re-routed through the fragments to receive id
)

type request struct {
	ep      *Endpoint
	peer    *peer
	buf     []byte
	isSend  bool
	proto   proto
	off     int    // bytes moved so far (pipeline, fallback)
	id      uint64 // rendezvous id (own, or the receiver's for protoFallback)
	done    bool
	n       int
	err     error
	waiting bool  // rendezvous control sent, completion pending
	place   Place // where buf lives (Memory's answer; PlaceHost without one): device memory is staged, never touched
	// orphan marks a request failed while the engine's queues may still
	// point at it (abort, peer gone): it is never recycled.
	orphan bool
	// large: counted in the endpoint's largeOpen until complete.
	large bool
	// A send's number among the messages of its channel (msg), and a
	// pipelined send's among the channel's pipelined messages (stream),
	// which its fragment cells carry (Params.Streams).
	msg, stream uint64

	// Persistent requests (SendInit, RecvInit) only.
	persistent bool
	active     bool // started and not yet waited for
	credit     bool // holds one of its channel's persistent credits
	freed      bool
}

// Done reports completion; it does not drive progress. With the progress
// thread it takes the engine for a moment, so that the progress thread's
// writes are visible.
func (r *request) Done() bool {
	if r.ep.async {
		r.ep.acquire()
		d := r.done
		r.ep.exit()
		return d
	}
	return r.done
}

func (r *request) Len() int   { return r.n }
func (r *request) Err() error { return r.err }

func (r *request) complete(n int, err error) {
	r.n, r.err, r.done = n, err, true
	if r.large {
		r.large = false
		r.ep.largeOpen--
	}
}

// describe names the operation for error messages.
func (r *request) describe() string {
	if r.isSend {
		what := "send"
		if r.proto == protoRendezvous || r.proto == protoFallback {
			what = "rendezvous send"
		}
		return fmt.Sprintf("%s of %d bytes to rank %d", what, len(r.buf), r.peer.rank)
	}
	if r.proto == protoRendezvous {
		return fmt.Sprintf("rendezvous receive of %d bytes from rank %d", r.n, r.peer.rank)
	}
	return fmt.Sprintf("receive of up to %d bytes from rank %d", len(r.buf), r.peer.rank)
}

// unexpected is a message that arrived before its receive was posted.
type unexpected struct {
	data     []byte // eager or pipelined payload (heap copy)
	got      int    // bytes of data arrived so far
	complete bool
	rts      bool  // a rendezvous request: data is nil
	place    Place // where the rendezvous sender's buffer lives
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
	id   uint64 // the message's number on its channel
	size int
	req  *request    // destination: a posted receive, or
	unx  *unexpected // an unexpected-queue entry
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
	spell spellGuard // the sender's copies into tx's ring (spell.go)
	ctrl  queue[ctrlMsg]
	sendq queue[*request]
	recvq queue[*request]
	unexp queue[*unexpected]

	// Pipelined sends on tx taken from sendq, oldest first: those the
	// receiver awaits send one fragment each in turn, turn naming the next
	// (Params.Streams). msgOut numbers the next message on tx, nextOut the
	// next pipelined one; awaitedSeen is the receiver's count of posted
	// receives as last read.
	streams     []*request
	turn        int
	msgOut      uint64
	nextOut     uint64
	awaitedSeen uint64
	// awaited counts the receives posted for rx's messages; the sender
	// reads it (channel.awaited) to know which of its messages have one.
	awaited uint64
	// Pipelined messages arriving on rx, in the order they started; nextIn
	// is the number the next new one carries, inTurn where the next
	// fragment's message probably is (the sender takes turns in this order).
	arriving []incoming
	nextIn   uint64
	inTurn   int

	// fallq holds rendezvous sends whose single copy was refused, on their
	// way through the fragments to the receive that matched them.
	fallq queue[*request]
	// noSingle stops single copy with this peer, for the reason in fallback.
	noSingle bool
	fallback error

	watch *sys.ProcessWatch // nil for a peer in this very process
	gone  error             // set once the peer is known to have exited

	// Persistent sends on this channel: credits is how many of the
	// channel's Depth credits nobody holds; persist lists the live
	// persistent sends (holders, and those waiting for a credit).
	credits int
	persist []*request
}

// Endpoint is one rank's end of the sm transport.
type Endpoint struct {
	name      string
	rank      int
	params    Params
	single    SingleCopy
	events    EventCopy  // single, when its copies complete by events
	inflight  []inflight // requests waiting on a copy's event (completion.go)
	mem       Memory     // nil: every buffer is host memory
	peers     []*peer    // indexed by rank; nil for self
	active    []*peer    // the non-nil peers
	rndv      map[uint64]*request
	nextID    uint64
	free      []*request
	unexpFree []*unexpected
	// held: the last progress pass left a new message in its ring because
	// no receive was posted for it (progress parks it if nothing else
	// moves). early counts the messages parked in the unexpected queues.
	held  bool
	early uint64
	abort atomic.Pointer[error] // set by Abort; terminal
	// in and out copy fragments into the ring and out of it (copier.go).
	in, out copier
	closed  bool
	// livePersistent counts persistent requests not yet freed.
	livePersistent int

	// sm.progress=thread (async.go). async says every entry point takes
	// the engine through the appIn/progressIn hand-off; dormant, its
	// opposite while there is a progress goroutine, that no open operation
	// needs it (the entry points skip the hand-off). Both are the
	// application's: dormantFlag publishes dormant to the goroutine, and
	// wakes counts the application's wakeProgress calls for it. fenced
	// says the goroutine's membarrier lets the application store those
	// words plainly.
	async       bool
	dormant     bool
	fenced      bool
	appIn       uint32
	progressIn  uint32
	dormantFlag uint32
	wakes       uint32
	parked      uint32 // the goroutine waits for a token on wake
	progressTID int    // the progress goroutine's thread, once New has made it
	// largeOpen counts the posted operations above the eager limit not yet
	// complete; only the engine's owner touches it.
	largeOpen int
	// The progress goroutine's life (nil without sm.progress=thread):
	// made by New, woken through wake, ended by stopProgress.
	wake, stopProgress, progressDone chan struct{}
	// calls counts the application's communication calls with the
	// progress thread: the progress thread leaves the work to an
	// application that is calling in. Plain: only the owner of the engine
	// reads or writes it.
	calls uint64
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
		peers: make([]*peer, env.Size), rndv: map[uint64]*request{}}
	e.in, e.out = newCopier(p.Copy, true), newCopier(p.Copy, false)
	var localPerKiB uint64 // 0: no guard
	if e.in.guard {
		localPerKiB = localCopyPerKiB()
	}
	e.events, _ = single.(EventCopy)
	self := os.Getpid()
	for r := 0; r < env.Size; r++ {
		if r == env.Rank {
			continue
		}
		out, err := openChannel(env.Segment, env.Rank, r, env.Size, p)
		if err != nil {
			e.closeWatches()
			return nil, err
		}
		in, err := openChannel(env.Segment, r, env.Rank, env.Size, p)
		if err != nil {
			e.closeWatches()
			return nil, err
		}
		pr := &peer{rank: r, pid: env.PIDs[r], tx: producer{channel: out}, rx: consumer{channel: in}, credits: p.Depth,
			spell: newSpellGuard(localPerKiB)}
		if pr.pid != self {
			if pr.watch, err = sys.WatchProcess(pr.pid); err != nil {
				e.closeWatches()
				return nil, fmt.Errorf("%s: watch rank %d: %w", name, r, err)
			}
		}
		e.peers[r] = pr
		e.active = append(e.active, pr)
	}
	// sm.progress=thread: the goroutine is made here and parks until the
	// first operation above the eager limit (startProgressFor), or starts
	// at once with a Memory hook (NewWithMemory).
	if p.Progress == "thread" {
		e.prepareProgressThread()
	}
	return e, nil
}

func (e *Endpoint) closeWatches() {
	for _, p := range e.peers {
		if p != nil && p.watch != nil {
			p.watch.Close()
		}
	}
}

// Name is the transport name the endpoint was registered under.
func (e *Endpoint) Name() string { return e.name }

// Params returns the channel parameters in force.
func (e *Endpoint) Params() Params { return e.params }

// Fallbacks reports, by peer rank, why single copy with that peer was
// given up for copy-in/copy-out. It is empty while single copy works (or
// was never used).
func (e *Endpoint) Fallbacks() map[int]error {
	if e.async {
		e.acquire()
		defer e.exit()
	}
	m := map[int]error{}
	for _, p := range e.active {
		if p.noSingle {
			m[p.rank] = p.fallback
		}
	}
	return m
}

// Close stops the progress thread, delivers queued control cells (a peer
// may be waiting on a completion) and fails if requests are still
// outstanding. The segment itself belongs to the rank runtime.
func (e *Endpoint) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	e.stopProgressThread() // from here on this goroutine is the only user
	defer e.closeWatches()
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
		if sends := p.sendq.len() + p.fallq.len() + len(p.streams); sends+p.recvq.len() > 0 || len(p.arriving) > 0 {
			return fmt.Errorf("%s: close with %d sends and %d receives outstanding to rank %d", e.name, sends, p.recvq.len(), p.rank)
		}
	}
	if len(e.rndv) > 0 {
		return fmt.Errorf("%s: close with %d rendezvous outstanding", e.name, len(e.rndv))
	}
	if e.pollCopies(); len(e.inflight) > 0 {
		return fmt.Errorf("%s: close with %d single copies in flight", e.name, len(e.inflight))
	}
	if e.livePersistent > 0 {
		return fmt.Errorf("%s: close with %d persistent requests not freed", e.name, e.livePersistent)
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

func (e *Endpoint) protoFor(p *peer, r *request) proto {
	n := len(r.buf)
	if r.device() {
		return e.deviceProto(p, n)
	}
	if r.place == PlacePinned && e.pinnedRendezvous(p, n) {
		return protoRendezvous
	}
	switch {
	case n <= e.params.EagerLimit:
		return protoEager
	case e.single != nil && !p.noSingle && e.single.Rendezvous(n):
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

// recycle makes a finished request reusable, except after an abort or a
// failure that left queues pointing at it, and except persistent requests,
// which live until freed.
func (e *Endpoint) recycle(r *request) {
	if !r.orphan && !r.persistent && e.abort.Load() == nil {
		e.free = append(e.free, r)
	}
}

// Send blocks until buf may be reused.
func (e *Endpoint) Send(to int, buf []byte) error {
	e.startProgressFor(len(buf))
	if e.async {
		e.enter()
		err := e.send(to, buf)
		e.exit()
		return err
	}
	return e.send(to, buf)
}

func (e *Endpoint) send(to int, buf []byte) error {
	p, err := e.peer(to)
	if err != nil {
		return err
	}
	// Fast path: nothing queued ahead and room for an eager cell.
	if e.mem == nil && len(buf) <= e.params.EagerLimit && p.sendq.len() == 0 && len(p.streams) == 0 && p.ctrl.len() == 0 && p.tx.cellFree() {
		copy(p.tx.cell(), buf)
		p.tx.publish(kindEager, len(buf))
		p.msgOut++
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
	p, err := e.peer(from)
	if err != nil {
		return 0, err
	}
	// Fast path for two ranks: nothing pending, poll the one channel.
	if e.mem == nil && len(e.active) == 1 && p.recvq.len() == 0 && p.unexp.len() == 0 && len(p.arriving) == 0 && p.sendq.len() == 0 && p.ctrl.len() == 0 {
		for spin := 0; ; spin++ {
			h := p.rx.peek()
			if h == nil {
				if err := e.idle(spin); err != nil {
					return 0, err
				}
				if spin&livenessMask == livenessMask && e.peerExited(p) {
					break // the general path below reports it
				}
				continue
			}
			if h.kind == kindEager && int(h.length) <= len(buf) {
				n := int(h.length)
				copy(buf, p.rx.body()[:n])
				p.rx.release()
				e.await(p)
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

// livenessMask: a waiter that has made no progress checks every 4096 polls
// (one system call, when it yields anyway) whether the peer it waits for
// is still alive.
const livenessMask = 4095

// peerExited reports whether p's process has exited, remembering it.
func (e *Endpoint) peerExited(p *peer) bool {
	if p.gone != nil {
		return true
	}
	if p.watch == nil || !p.watch.Exited() {
		return false
	}
	p.gone = fmt.Errorf("peer rank %d (pid %d) has exited", p.rank, p.pid)
	return true
}

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
	e.startProgressFor(len(buf))
	if !e.async {
		return e.isend(p, buf), nil
	}
	e.enter() // no defer: it costs more than the hand-off on this path
	r := e.isend(p, buf)
	e.exit()
	return r, nil
}

func (e *Endpoint) isend(p *peer, buf []byte) *request {
	r := e.newRequest(p, buf, true)
	if e.mem != nil && !e.classify(r) {
		return r
	}
	e.postSend(p, r)
	return r
}

// postSend queues send r (fresh or a started persistent one) and moves
// what the ring takes now, except that a pipelined send moves only its
// first fragment: the rest moves while the application waits, in turns
// with the sends posted after it (Params.Streams). (Moving all the ring
// took, with a receiver that kept up, moved each message whole at its
// post: a window of 16 MiB messages from one buffer then swept source and
// destination once per message, 13-14 GB/s, instead of copying each
// fragment's worth of them once per message in a row.)
func (e *Endpoint) postSend(p *peer, r *request) {
	e.countLarge(r)
	r.proto = e.protoFor(p, r)
	r.msg = p.msgOut
	p.msgOut++
	p.sendq.push(r)
	e.pushSends(p, true)
}

// countLarge counts r, just posted, in largeOpen if it is above the eager
// limit: the endpoint stays awake until it completes.
func (e *Endpoint) countLarge(r *request) {
	if len(r.buf) > e.params.EagerLimit {
		r.large = true
		e.largeOpen++
	}
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
	r := e.newRequest(p, buf, false)
	if e.mem != nil && !e.classify(r) {
		return r
	}
	e.postRecv(p, r)
	return r
}

// postRecv matches r with the oldest early arrival from p, or queues it.
// It does not drain the channel: a window of receives is posted before
// its messages are taken from the ring. (Draining here parked every
// message that arrived while the window was still being posted, and
// copied it twice: 16 KiB bw moved 0.5-0.75x what it moves now,
// results/vm/early.)
func (e *Endpoint) postRecv(p *peer, r *request) {
	e.countLarge(r)
	e.await(p)
	if p.unexp.len() == 0 {
		p.recvq.push(r)
		return
	}
	u := p.unexp.pop()
	switch {
	case u.rts:
		e.startRendezvousRecv(p, r, u.size, u.addr, u.id, u.place)
		e.freeUnexpected(u)
	case u.complete:
		var n int
		if r.device() {
			n = e.getDevice(r, r.buf, u.data)
		} else {
			n = copy(r.buf, u.data)
		}
		r.complete(n, truncated(u.size, len(r.buf)))
		e.freeUnexpected(u)
	default: // still arriving: finish (and free) when the last fragment lands
		u.req = r
	}
}

// await counts one more receive for p's messages and tells the sender.
func (e *Endpoint) await(p *peer) {
	p.awaited++
	atomic.StoreUint64(p.rx.awaited, p.awaited)
}

func truncated(size, capacity int) error {
	if size > capacity {
		return fmt.Errorf("%w: %d-byte message into %d-byte buffer", transports.ErrTruncated, size, capacity)
	}
	return nil
}

// Wait drives progress until all requests complete, then recycles them: a
// request must not be used after Wait returns. A persistent request is not
// recycled but made inactive, ready for its next Start; waiting for an
// inactive one returns at once.
func (e *Endpoint) Wait(reqs ...transports.Request) error {
	if e.async {
		e.enter()
		defer e.exit()
	}
	var first error
	for _, q := range reqs {
		r, err := e.own(q)
		if err != nil {
			return err
		}
		if r.persistent && !r.active {
			continue
		}
		e.waitOne(r)
		r.active = false
		if r.err != nil && first == nil {
			first = r.err
		}
	}
	for _, q := range reqs {
		r, _ := e.own(q)
		e.recycle(r)
	}
	return first
}

// own returns the engine's request behind q, or an error if q belongs to
// another endpoint or transport.
func (e *Endpoint) own(q transports.Request) (*request, error) {
	var r *request
	switch q := q.(type) {
	case *request:
		r = q
	case *persistentRequest:
		r = &q.request
	}
	if r == nil || r.ep != e {
		return nil, fmt.Errorf("%s: foreign request %T", e.name, q)
	}
	return r, nil
}

func (e *Endpoint) waitOne(r *request) {
	progress := e.progress
	if r.isSend && e.params.NoDrainOnSend {
		progress = e.progressSendsOnly // hazard H5's unsafe variant
	}
	for spin := 0; !r.done; spin++ {
		if progress() {
			continue
		}
		if err := e.idle(spin); err != nil {
			r.orphan = true
			r.complete(0, err)
			return
		}
		if spin&livenessMask == livenessMask && e.peerExited(r.peer) {
			progress() // it may have published its last cells just before exiting
			if !r.done {
				r.orphan = true
				r.complete(0, fmt.Errorf("%s: %s: %w", e.name, r.describe(), r.peer.gone))
			}
		}
	}
	e.flushCtrl()
}

// flushCtrl delivers every queued control cell. A completed operation may
// still owe its peer a completion (a push FIN, a pull FIN behind a full
// ring); returning before it is delivered would leave the peer waiting on a
// rank that has moved on. Cells for a peer that has exited are dropped.
func (e *Endpoint) flushCtrl() {
	for spin := 0; e.ctrlPending(); spin++ {
		if e.progress() {
			continue
		}
		if e.idle(spin) != nil {
			return
		}
		if spin&livenessMask == livenessMask {
			for _, p := range e.active {
				if p.ctrl.len() > 0 && e.peerExited(p) {
					p.ctrl = queue[ctrlMsg]{}
				}
			}
		}
	}
}

// Progress advances every channel once and reports whether anything moved.
func (e *Endpoint) Progress() bool {
	if e.async {
		e.enter()
		defer e.exit()
	}
	return e.progress()
}

// progress is one step of every wait: it advances every channel and
// reports whether anything moved.
//
// A new message that no posted receive awaits stays in its ring while
// anything else moves, so that a receive posted a moment later takes it
// straight from the ring with one copy. Draining it at once instead parks
// it in the unexpected queue, a second copy; a receiver a message behind
// its sender, with the ring refilled as fast as it drains, then parks
// whole windows (two ranks streaming 32 KiB messages in windows of 64
// with no acknowledgement, 128 KiB ring: 3-13 GB/s, and 37-54 once
// unawaited messages stayed in the ring; results/vm/early). Only a pass
// that moves nothing else parks such messages: a peer blocked on a full
// ring then always gets room (hazard H5), because everything a moving
// pass advances (a posted receive, a queued send, a control cell) is
// finite.
func (e *Endpoint) progress() bool {
	if e.advance(false) {
		return true
	}
	return e.held && e.advance(true)
}

// advance is one progress pass over every channel; park says whether new
// messages without a posted receive go to the unexpected queue (else they
// stay in the ring, and held says so).
func (e *Endpoint) advance(park bool) bool {
	e.held = false
	moved := len(e.inflight) > 0 && e.pollCopies()
	for _, p := range e.active {
		if e.progressRecv(p, park) {
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
	moved := len(e.inflight) > 0 && e.pollCopies()
	for _, p := range e.active {
		if e.progressSend(p) {
			moved = true
		}
	}
	return moved
}

// progressSend moves what p's ring takes now: queued control cells, then
// fallback fragments, then queued sends in order.
func (e *Endpoint) progressSend(p *peer) bool { return e.pushSends(p, false) }

// pushSends is progressSend; posting stops the pipelined sends' turns
// once every one of them has started.
func (e *Endpoint) pushSends(p *peer, posting bool) bool {
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
	if p.fallq.len() > 0 && e.progressFallback(p) {
		moved = true
	}
	for {
		if len(p.streams) > 0 && e.turnStreams(p, posting) {
			moved = true
		}
		// Messages match in the order they start: nothing queued behind a
		// pipelined send goes before its first fragment.
		if n := len(p.streams); n > 0 && p.streams[n-1].off == 0 || p.sendq.len() == 0 {
			return moved
		}
		r := p.sendq.front()
		if r.persistent && !r.credit && !e.takeCredit(p, r) {
			return moved // every credit is in flight: wait for a completion
		}
		switch r.proto {
		case protoEager:
			if !p.tx.cellFree() {
				return moved
			}
			if r.device() {
				e.putDevice(r, p.tx.cell(), r.buf)
			} else {
				copy(p.tx.cell(), r.buf)
			}
			p.tx.publish(kindEager, len(r.buf))
			r.complete(len(r.buf), nil)
		case protoPipeline:
			if len(p.streams) >= e.params.Streams {
				return moved
			}
			r.stream = p.nextOut
			p.nextOut++
			p.streams = append(p.streams, r)
		case protoRendezvous:
			if p.noSingle { // refused since this send was queued
				r.proto = protoPipeline
				continue
			}
			if !p.tx.cellFree() {
				return moved
			}
			e.nextID++
			r.id, r.waiting = e.nextID, true
			e.rndv[r.id] = r
			putWords(p.tx.cell(), []uint64{uint64(len(r.buf)), uint64(addressOf(r.buf)), r.id, uint64(r.place)})
			p.tx.publish(kindRTS, ctrlPayload)
		}
		p.sendq.pop()
		moved = true
	}
}

// turnStreams moves fragments of p's pipelined sends, one each in turn,
// until the ring is full, every one is complete or, when posting, every
// one taking turns has started, and reports whether any moved.
//
// The turns keep the order in which messages start: streams that have not
// started are the newest, at the end, and turn never passes one without
// sending its first fragment.
func (e *Endpoint) turnStreams(p *peer, posting bool) bool {
	moved := false
	for {
		n := e.turning(p)
		if n == 0 || posting && p.streams[n-1].off > 0 {
			return moved
		}
		if p.turn >= n {
			p.turn = 0
		}
		r := p.streams[p.turn]
		if !e.sendFragment(p, r, kindFrag, uint64(len(r.buf)), r.stream) {
			return moved
		}
		moved = true
		if r.off < len(r.buf) {
			p.turn++
			continue
		}
		r.complete(len(r.buf), nil)
		p.streams = slices.Delete(p.streams, p.turn, p.turn+1)
	}
}

// turning is how many of p's streams take turns: the oldest, and after it
// those whose receive the peer has posted. A message no receive awaits
// would be parked in the unexpected queue and copied twice, and a stream
// that took turns with the oldest would park whole while a receiver posts
// its receives one at a time; behind the oldest it waits its turn instead.
// Streams are in message order, so those taking turns are a prefix.
func (e *Endpoint) turning(p *peer) int {
	n := len(p.streams)
	if n <= 1 || p.streams[n-1].msg < p.awaitedSeen {
		return n
	}
	p.awaitedSeen = atomic.LoadUint64(p.tx.awaited)
	i := 1
	for i < n && p.streams[i].msg < p.awaitedSeen {
		i++
	}
	return i
}

// sendFragments moves as much of r as the ring takes now and reports
// whether any moved. r is complete in the ring once r.off reaches
// len(r.buf).
func (e *Endpoint) sendFragments(p *peer, r *request, kind uint8, w0, w1 uint64) bool {
	moved := false
	for r.off < len(r.buf) && e.sendFragment(p, r, kind, w0, w1) {
		moved = true
	}
	return moved
}

// sendFragment moves r's next fragment into p's ring with a descriptor
// cell of this kind and these words, or reports false when the ring has no
// room for it.
func (e *Endpoint) sendFragment(p *peer, r *request, kind uint8, w0, w1 uint64) bool {
	if !p.tx.cellFree() {
		return false
	}
	frag := p.tx.nextFrag(len(r.buf) - r.off)
	if frag == nil {
		return false
	}
	var n int
	if r.device() {
		n = e.putDevice(r, frag, r.buf[r.off:])
	} else {
		n = e.copyIn(p, frag, r.buf[r.off:])
	}
	p.tx.publishFrag(kind, n, w0, w1)
	r.off += n
	return true
}

// copyIn copies one fragment into p's ring.
func (e *Endpoint) copyIn(p *peer, frag, src []byte) int {
	if e.in.guard && !e.in.movsb(min(len(frag), len(src))) {
		return p.spell.copy(frag, src)
	}
	return e.in.copy(frag, src)
}

// progressRecv consumes p's published cells. A cell that starts a
// message no posted receive awaits ends the pass unless park is set
// (progress says when).
func (e *Endpoint) progressRecv(p *peer, park bool) bool {
	moved := false
	for {
		h := p.rx.peek()
		if h == nil {
			return moved
		}
		body := p.rx.body()
		if !park && p.recvq.len() == 0 && startsMessage(p, h.kind, body) {
			e.held = true
			return moved
		}
		moved = true
		switch h.kind {
		case kindCTS:
			w := getWords(body)
			p.rx.release()
			e.pushRendezvous(p, w[0], w[1], uintptr(w[2]), int(w[3]))
		case kindFIN:
			w := getWords(body)
			p.rx.release()
			e.finishRendezvous(p, w[0], w[1], w[2], w[3])
		case kindEager:
			n := int(h.length)
			if r := e.matchNew(p); r != nil {
				if r.device() {
					r.complete(e.getDevice(r, r.buf, body[:n]), truncated(n, len(r.buf)))
				} else {
					r.complete(copy(r.buf, body[:n]), truncated(n, len(r.buf)))
				}
			} else {
				u := e.newUnexpected(n)
				u.got, u.complete = copy(u.data, body[:n]), true
				e.parkEarly(p, u)
			}
			p.rx.release()
		case kindRTS:
			w := getWords(body)
			p.rx.release()
			size, addr, id := int(w[0]), uintptr(w[1]), w[2]
			if r := e.matchNew(p); r != nil {
				e.startRendezvousRecv(p, r, size, addr, id, Place(w[3]))
			} else {
				u := e.newUnexpected(0)
				u.rts, u.size, u.addr, u.id, u.place = true, size, addr, id, Place(w[3])
				e.parkEarly(p, u)
			}
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
		case kindFallback:
			w := getWords(body)
			p.rx.release()
			e.disableSingle(p, e.peerRefused(p, "into", w[1]))
		default:
			panic(fmt.Sprintf("%s: corrupt channel %d->%d: cell kind %d", e.name, p.rank, e.rank, h.kind))
		}
	}
}

// startsMessage says whether a cell of this kind and body from p is the
// first of a message, one that matching pairs with a posted receive.
func startsMessage(p *peer, kind uint8, body []byte) bool {
	return kind == kindEager || kind == kindRTS || kind == kindFrag && binary.LittleEndian.Uint64(body[8:]) == p.nextIn
}

// parkEarly queues a message that arrived before its receive.
func (e *Endpoint) parkEarly(p *peer, u *unexpected) {
	p.unexp.push(u)
	e.early++
}

// matchNew pops the posted receive for a newly arriving message, or nil.
func (e *Endpoint) matchNew(p *peer) *request {
	if p.recvq.len() == 0 {
		return nil
	}
	return p.recvq.pop()
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

// arrivingIndex finds pipelined message id among p.arriving, opening
// (and matching) it if it is new, and returns its index.
func (e *Endpoint) arrivingIndex(p *peer, size int, id uint64) int {
	if id == p.nextIn {
		p.nextIn++
		in := incoming{id: id, size: size}
		if r := e.matchNew(p); r != nil {
			in.req = r
		} else {
			in.unx = e.newUnexpected(size)
			e.parkEarly(p, in.unx)
		}
		p.arriving = append(p.arriving, in)
		return len(p.arriving) - 1
	}
	if i := p.inTurn; i < len(p.arriving) && p.arriving[i].id == id {
		return i
	}
	for i := range p.arriving {
		if p.arriving[i].id == id {
			return i
		}
	}
	panic(fmt.Sprintf("%s: corrupt channel %d->%d: fragment of message %d, which is not arriving (next new: %d)", e.name, p.rank, e.rank, id, p.nextIn))
}

// arrived closes p.arriving[i], whose last fragment has landed.
func (e *Endpoint) arrived(p *peer, i int) {
	p.arriving = slices.Delete(p.arriving, i, i+1)
	p.inTurn = i
}

// copyOut copies a fragment of a size-byte message into its receive
// buffer. Streaming stores are for a message arriving alone: when messages
// take turns (Params.Streams), the receiver writes a fragment's worth of
// each in a row, and ordinary stores keep what it writes again in the
// caches: a window of 16 MiB messages into one buffer moved at 49-56 GB/s
// with ordinary stores and 32-35 streaming (bw, 5 interleaved rounds,
// results/vm/streams). A single 16 MiB message still streams: bw with a
// window of 1 moved 31.6-34.0 GB/s streaming and 10.9-14.1 without
// (results/vm/streams/w1.txt).
func (e *Endpoint) copyOut(dst, src []byte, size int, turns bool) {
	if e.params.StreamMin > 0 && size >= e.params.StreamMin && !turns {
		sys.CopyStream(dst, src)
		return
	}
	e.out.copy(dst, src)
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
