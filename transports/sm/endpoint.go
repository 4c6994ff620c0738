package sm

// The Endpoint: its peers, construction, Close and Abort.

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/gotune/gotune/internal/queue"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

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

// Exporter is implemented by a SingleCopy that reaches a peer's buffer
// through a handle the buffer's owner makes (KNEM's region cookie), not by
// its address alone. The owner exports the buffer when it announces it: the
// sender in its request-to-send when the mechanism pulls, the receiver in
// its clear-to-send when it pushes; the 64-bit handle travels in that
// control message and the copying side passes it to CopyHandle. Why: the
// kernel checks the handle, so a process can only reach what its peer
// declared.
//
// An Export error matching ErrNotSupported falls back to copy-in/copy-out
// as a refused copy does; any other fails the message. Every handle
// exported is released exactly once, when the peer is done with it or the
// message went another way (used says whether the peer's copy ran).
type Exporter interface {
	SingleCopy
	// Export makes buf (where at says it lives) reachable by the peer's
	// copy: writable when the peer writes into it (push). A handle of 0
	// says the message needs none (Copy is used, with the address).
	Export(buf []byte, at Place, writable bool) (handle uint64, err error)
	// CopyHandle is Copy through the handle the peer exported for remote.
	CopyHandle(pid int, local []byte, at Place, handle uint64, remote uintptr, pull bool) error
	// Release gives back a handle this side exported.
	Release(handle uint64, used bool)
}

type peer struct {
	rank  int
	pid   int
	tx    producer
	rx    consumer
	spell spellGuard // the sender's copies into tx's ring (spell.go)
	box   box        // the pair's fast box (box.go)
	ctrl  queue.FIFO[ctrlMsg]
	sendq queue.FIFO[*request]
	recvq queue.FIFO[*request]
	unexp queue.FIFO[*unexpected]

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
	fallq queue.FIFO[*request]
	// noSingle stops single copy with this peer, for the reason in fallback.
	noSingle bool
	fallback error
	// pulled: a pull from this peer has succeeded, so a split copy's own
	// part can always finish; noSplit: the peer could not copy its part of
	// one (RouteSplit), so this side pulls whole from then on.
	pulled, noSplit bool

	watch *sys.ProcessWatch // nil for a peer in this very process
	gone  error             // set once the peer is known to have exited

	// Persistent sends on this channel: credits is how many of the
	// channel's Depth credits nobody holds; persist lists the live
	// persistent sends (holders, and those waiting for a credit).
	credits int
	persist []*request

	// pack is the packed cell tx fills with small messages (pack.go).
	pack pack
}

// Endpoint is one rank's end of the sm transport.
type Endpoint struct {
	name     string
	rank     int
	params   Params
	single   SingleCopy
	export   Exporter   // single, when the peer's buffers are reached through handles
	events   EventCopy  // single, when its copies complete by events
	inflight []inflight // requests waiting on a copy's event (completion.go)
	// matched: receives matched with a parked request-to-send whose copy
	// runs synchronously; the next progress pass starts them (postRecv).
	matched []matchedRTS
	// flusher: events defers its marks; marksDue: copies started since
	// the last flushMarks.
	flusher   MarkFlusher
	marksDue  bool
	mem       Memory  // nil: every buffer is host memory
	peers     []*peer // indexed by rank; nil for self
	active    []*peer // the non-nil peers
	rndv      map[uint64]*request
	nextID    uint64
	free      []*request
	unexpFree []*unexpected
	// held: the last progress pass left a new message in its ring because
	// no receive was posted for it (progress parks it if nothing else
	// moves). early counts the messages parked in the unexpected queues.
	held  bool
	early uint64
	// heldSince is when the passes that move nothing while messages are
	// held began (zero: none since the last moving pass); clock reads the
	// time for it (time.Now; tests turn it by hand).
	heldSince time.Time
	clock     func() time.Time
	// openPacks counts the peers whose tx cell is an open pack (pack.go).
	openPacks int
	// crowded: the job has more ranks than the cpuset has CPUs, so a
	// waiter's peer may need this very CPU to move (idle yields at once).
	crowded bool
	abort   atomic.Pointer[error] // set by Abort; terminal
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
	p = p.ForRanks(env.Size)
	e := &Endpoint{name: name, rank: env.Rank, params: p, single: single,
		peers: make([]*peer, env.Size), rndv: map[uint64]*request{}, crowded: crowded(env.Size), clock: time.Now}
	e.in, e.out = newCopier(p.Copy, true), newCopier(p.Copy, false)
	var localPerKiB uint64 // 0: no guard
	if e.in.guard {
		localPerKiB = localCopyPerKiB()
	}
	e.events, _ = single.(EventCopy)
	e.flusher, _ = single.(MarkFlusher)
	e.export, _ = single.(Exporter)
	self := os.Getpid()
	ring := &fragRing{}
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
		pr := &peer{rank: r, pid: env.PIDs[r], tx: producer{channel: out, ring: ring}, rx: consumer{channel: in}, credits: p.Depth,
			spell: newSpellGuard(localPerKiB), box: openBox(env.Segment, env.Rank, r, env.Size, p)}
		if pr.pid != self {
			if pr.watch, err = sys.WatchProcess(pr.pid); err != nil {
				e.closeWatches()
				return nil, fmt.Errorf("%s: watch rank %d: %w", name, r, err)
			}
		}
		e.peers[r] = pr
		e.active = append(e.active, pr)
	}
	// The segment is mapped lazily: a pair's cells are committed as the
	// pair first uses them, this rank's ring a step at a time as its
	// fragments reach it (fragRing.faultTo).
	// sm.progress=thread: the goroutine is made here and parks until the
	// first operation above the eager limit (startProgressFor), or starts
	// at once with a Memory hook (NewWithMemory).
	if p.Progress == "thread" {
		e.prepareProgressThread()
	}
	return e, nil
}

// crowded says whether ranks ranks outnumber the CPUs of this process's
// cpuset (the CPUs the job's ranks may be placed on), or the online CPUs.
func crowded(ranks int) bool {
	cpus, err := sys.CpusetCPUs("/")
	return err == nil && ranks > len(cpus)
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
	e.closePacks()
	if err := e.abort.Load(); err != nil {
		return *err
	}
	e.startMatched() // posted receives copy as they did when posted
	// A rendezvous nobody will receive must still release its sender.
	var unreceived []error
	for _, p := range e.active {
		if n := p.unexp.Len(); n > 0 {
			unreceived = append(unreceived, fmt.Errorf("%s: close with %d unreceived messages from rank %d", e.name, n, p.rank))
		}
		for p.unexp.Len() > 0 {
			if u := p.unexp.Pop(); u.rts {
				e.queueCtrl(p, kindFIN, u.id, finFailed, 0, 0)
			}
		}
	}
	e.flushCtrl()
	if len(unreceived) > 0 {
		return errors.Join(unreceived...)
	}
	for _, p := range e.active {
		if sends := p.sendq.Len() + p.fallq.Len() + len(p.streams); sends+p.recvq.Len() > 0 || len(p.arriving) > 0 {
			return fmt.Errorf("%s: close with %d sends and %d receives outstanding to rank %d", e.name, sends, p.recvq.Len(), p.rank)
		}
	}
	if len(e.rndv) > 0 {
		return fmt.Errorf("%s: close with %d rendezvous outstanding", e.name, len(e.rndv))
	}
	e.flushMarks() // a peer may wait on a copy this rank started
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
		if p.ctrl.Len() > 0 {
			return true
		}
	}
	return false
}

func (e *Endpoint) peer(r int) (*peer, error) {
	if p := e.peerOf(r); p != nil {
		return p, nil
	}
	return nil, e.noPeer(r)
}

// peerOf is rank r's peer, nil for none: peer's test alone, which inlines
// into the blocking calls' fast paths.
func (e *Endpoint) peerOf(r int) *peer {
	if uint(r) < uint(len(e.peers)) {
		return e.peers[r]
	}
	return nil
}

// noPeer is peer's error.
func (e *Endpoint) noPeer(r int) error { return fmt.Errorf("%s: no peer rank %d", e.name, r) }

// Abort makes every wait in progress, and every later one, fail with err.
// It may be called from any goroutine; the endpoint is unusable afterwards.
// It is how a supervisor stops a rank whose peer is gone.
func (e *Endpoint) Abort(err error) { e.abort.Store(&err) }
