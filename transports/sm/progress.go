package sm

// Progress and waiting: the passes over every channel, the polling
// back-off and the liveness checks of a waiter.

import (
	"fmt"
	"time"

	"github.com/gotune/gotune/internal/queue"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

// Wait drives progress until all requests complete, then recycles them: a
// request must not be used after Wait returns. A persistent request is not
// recycled but made inactive, ready for its next Start; waiting for an
// inactive one returns at once.
func (e *Endpoint) Wait(reqs ...transports.Request) error {
	if e.async {
		e.enter()
		defer e.exit()
	}
	e.closePacks()
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
	e.flushCtrl()
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

// waitOne drives progress until r completes. The caller delivers the
// control cells still queued (flushCtrl) before it returns to the
// application: once per call, not per request of a Wait.
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
				if p.ctrl.Len() > 0 && e.peerExited(p) {
					p.ctrl = queue.FIFO[ctrlMsg]{}
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
// straight from the ring with one copy. Why: draining it at once parks it
// in the unexpected queue, a second copy, and a receiver a message behind
// its sender then parks whole windows. Only passes that move nothing else
// for Params.Park park such messages: a peer blocked on a full ring then
// always gets room within that time (hazard H5), because everything a
// moving pass advances (a posted receive, a queued send, a control cell)
// is finite.
func (e *Endpoint) progress() bool {
	if e.advance(false) {
		e.heldSince = time.Time{}
		return true
	}
	return e.held && e.parkDue() && e.advance(true)
}

// parkDue reports whether the messages held in their rings have waited
// Params.Park through passes that moved nothing; the first such pass
// starts the wait.
func (e *Endpoint) parkDue() bool {
	if e.params.Park <= 0 {
		return true
	}
	now := e.clock()
	if e.heldSince.IsZero() {
		e.heldSince = now
		return false
	}
	if now.Sub(e.heldSince) < e.params.Park {
		return false
	}
	e.heldSince = time.Time{}
	return true
}

// advance is one progress pass over every channel; park says whether new
// messages without a posted receive go to the unexpected queue (else they
// stay in the ring, and held says so).
func (e *Endpoint) advance(park bool) bool {
	e.held = false
	moved := e.startMatched()
	if len(e.inflight) > 0 && e.pollCopies() {
		moved = true
	}
	for _, p := range e.active {
		if e.progressRecv(p, park) {
			moved = true
		}
		if e.progressSend(p) {
			moved = true
		}
	}
	e.flushMarks()
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
	e.flushMarks()
	return moved
}

// idle backs off a polling loop that made no progress: now and then it
// yields the CPU, so oversubscribed ranks still advance, and checks for an
// abort. Past the tight spins a crowded endpoint yields at every poll, as
// Open MPI does when oversubscribed (mpi_yield_when_idle): the peer it
// waits for may be queued on this CPU, and a pause would only delay it.
func (e *Endpoint) idle(spin int) error {
	if spin >= tightSpins {
		if e.crowded {
			sys.Yield()
		} else {
			sys.CPURelax()
		}
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

// pollSpins is how long a blocking receive polls its peer's ring with
// only a load fence between polls (no pause, no progress pass) before the
// back-off of idle: about a microsecond, longer than a small message's
// round trip, so that the reply of a ping-pong finds the receiver still
// in its tight loop. Why: a PAUSE (140 cycles on recent Intel cores)
// between polls adds its length to the message's latency at random; the
// fence (sys.PollFence) keeps one load of the line in flight, which on
// AMD cores lets the sender take the line sooner than a stream of loads.
const pollSpins = 1024

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
