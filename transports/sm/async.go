package sm

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gotune/gotune/internal/sys"
)

// Asynchronous progress (sm.progress=thread).
//
// With polling progress a rendezvous completes only while the receiver is
// inside the engine: a receiver that posts a receive and then computes
// leaves the sender waiting for the whole computation (hazard H8). With the
// progress thread, a goroutine locked to its own OS thread advances every
// channel whenever the application is not inside the engine: it answers
// requests-to-send, pulls single copies into posted receives and drains
// fragments into them.
//
// Hand-off: two flags, one per side, Dekker-style. The application sets
// appIn on entry (a plain store), then checks progressIn; the progress
// goroutine sets progressIn (an atomic exchange), forces a barrier on
// every thread of the process (membarrier), then checks appIn. Whoever
// sees the other's flag backs off, so the engine state is never touched by
// both at once. The barrier, a system call, is paid by the progress
// goroutine on its rare passes; the application pays two plain stores and
// a load per call. Without membarrier the application's stores are atomic
// exchanges instead (one locked instruction each). The progress goroutine
// does not compete with an application that is polling: if the
// application has polled since the goroutine last looked, it gives the
// engine straight back. When it finds nothing to do it sleeps, backing off
// (see progressMaxSleep): never a spinning core.
//
// Dormancy: the goroutine is needed only while an operation above the
// eager limit is open (startProgressFor says why). The endpoint counts
// those (largeOpen) and is dormant while there are none: the entry points
// skip the hand-off, as with polling progress, and the goroutine, seeing
// dormantFlag, stays out of the engine and parks once a whole sleep has
// passed without a wake; the next large operation unparks it. So eager
// traffic never pays for the hand-off, the goroutine costs no context
// switches while the application exchanges only small messages or
// computes with nothing large open, and H8's case, a large receive posted
// before computing, keeps the endpoint awake until the goroutine has
// completed it. (A large send to a rank that has posted no receive may
// wait for that rank to call in: MPI allows it, and nothing open on the
// receiver asks for progress.) With polling progress (the default) the
// entry points test one boolean of the endpoint and touch no flag.
// Why dormancy: the hand-off on every call is what the thread costs small
// messages (docs/transports.md, sm: progress thread).

// The progress goroutine's sleeps: it backs off from progressMinSleep to
// progressMaxSleep while the application is away and nothing arrives, and
// from progressBusySleep to progressBusyMaxSleep while the application
// communicates by itself. Why: each wake-up of a goroutine locked to its
// thread costs a few context switches taken from the ranks' CPUs, which
// shows in bandwidth while the application communicates.
//
// The busy sleep doubles from progressBusySleep while the application is
// found communicating, so a goroutine woken by a large operation still
// looks again soon (an application that posts a receive and goes off to
// compute is served within 10-30 ms), and one that keeps finding the
// application in charge wakes ten times a second. The cap bounds how late
// the goroutine notices that a long-communicating application went away
// with a large operation open.
const (
	progressMinSleep     = 20 * time.Microsecond
	progressMaxSleep     = time.Millisecond
	progressBusySleep    = 10 * time.Millisecond
	progressBusyMaxSleep = 100 * time.Millisecond
)

// busier is the sleep after finding the application communicating: the
// busy sleep's first step, or the next one up.
func busier(sleep time.Duration) time.Duration {
	if sleep < progressBusySleep {
		return progressBusySleep
	}
	return min(2*sleep, progressBusyMaxSleep)
}

// enter makes the application the owner of the engine for a
// communication call.
func (e *Endpoint) enter() {
	e.acquire()
	e.calls++
}

// acquire makes the application the owner of the engine.
func (e *Endpoint) acquire() {
	e.setAppIn(1)
	if atomic.LoadUint32(&e.progressIn) != 0 {
		e.acquireSlow()
	}
}

// acquireSlow waits out the progress thread's current pass, which is
// short; the application never waits for its sleep.
func (e *Endpoint) acquireSlow() {
	for spin := 0; ; spin++ {
		e.setAppIn(0)
		for atomic.LoadUint32(&e.progressIn) != 0 {
			switch {
			case spin < tightSpins:
				sys.CPURelax()
			case spin&1 == 0:
				runtime.Gosched() // the pass may have been preempted by Go's scheduler,
			default:
				sys.Yield() // or by the kernel's: let it finish
			}
			spin++
		}
		e.setAppIn(1)
		if atomic.LoadUint32(&e.progressIn) == 0 {
			return
		}
	}
}

// exit gives the engine back; the last exit with nothing open that needs
// progress makes the endpoint dormant.
func (e *Endpoint) exit() {
	if !e.needsProgress() {
		e.doze()
	}
	e.setAppIn(0)
}

// setAppIn is the application's side of the hand-off.
func (e *Endpoint) setAppIn(v uint32) {
	if e.fenced {
		sys.StoreRelaxed(&e.appIn, v)
	} else {
		atomic.StoreUint32(&e.appIn, v)
	}
}

// tryTake is the progress goroutine's side: it owns the engine when it
// returns true, until release.
func (e *Endpoint) tryTake() bool {
	if atomic.LoadUint32(&e.appIn) != 0 {
		// The application is in the engine (a communicating one mostly
		// is): back off before the barrier, whose interrupt would reach
		// the application's CPU for nothing.
		return false
	}
	atomic.StoreUint32(&e.progressIn, 1)
	if e.fenced {
		if err := sys.ProcessBarrier(); err != nil {
			e.fenced = false // cannot happen once registered; never risk it
		}
	}
	if atomic.LoadUint32(&e.appIn) != 0 {
		atomic.StoreUint32(&e.progressIn, 0)
		return false
	}
	return true
}

func (e *Endpoint) release() { atomic.StoreUint32(&e.progressIn, 0) }

// startProgressFor wakes the progress goroutine when an operation of n
// bytes may need it: one above the eager limit, which travels pipelined or
// by rendezvous and so completes only while someone progresses both sides.
// Eager traffic completes on its own (a cell is published at once, or the
// sender, blocked on a full FIFO, drains its own receives until the
// receiver returns), so while no operation above the eager limit is open
// the endpoint is dormant: the entry points skip the hand-off, as with
// polling progress, and the goroutine stays out of the engine. The
// endpoint goes dormant again when the last such operation is done (exit,
// needsProgress). It is called before the entry point's hand-off: a
// goroutine woken here may take a pass before the application's enter,
// which then waits it out.
//
// Every entry point calls it: it inlines to one test of dormant, which
// is false when the endpoint is awake or has no goroutine.
func (e *Endpoint) startProgressFor(n int) {
	if e.dormant {
		e.wakeAbove(n)
	}
}

// wakeAbove wakes the dormant goroutine for an operation of n bytes above
// the eager limit. Out of line: inlined, it would keep startProgressFor
// from inlining.
//
//go:noinline
func (e *Endpoint) wakeAbove(n int) {
	if n > e.params.EagerLimit {
		e.wakeProgress()
	}
}

// wakeProgress ends dormancy: from here on every entry point takes the
// hand-off, and the goroutine, unparked if it was parked, polls.
func (e *Endpoint) wakeProgress() {
	e.async, e.dormant = true, false
	e.publish(&e.dormantFlag, 0)
	e.publish(&e.wakes, e.wakes+1)
	// Paired with park: either the goroutine sees dormantFlag clear, or
	// this sees it parked and hands it the token.
	if atomic.LoadUint32(&e.parked) != 0 && atomic.CompareAndSwapUint32(&e.parked, 1, 0) {
		e.wake <- struct{}{}
	}
}

// doze makes the endpoint dormant; the application calls it owning the
// engine, before it clears appIn, so a goroutine that takes the engine
// after that sees dormantFlag set.
func (e *Endpoint) doze() {
	e.async, e.dormant = false, true
	e.publish(&e.dormantFlag, 1)
}

// needsProgress says whether anything open on the endpoint waits for
// progress that a peer cannot make alone: an operation above the eager
// limit, or a control cell owed to a peer (a completion behind a full
// ring). Only the engine's owner may call it.
func (e *Endpoint) needsProgress() bool {
	return e.largeOpen > 0 || e.mem != nil || e.ctrlPending()
}

// publish stores a word the progress goroutine reads: plainly when the
// goroutine's barrier orders it (as appIn).
func (e *Endpoint) publish(p *uint32, v uint32) {
	if e.fenced {
		sys.StoreRelaxed(p, v)
	} else {
		atomic.StoreUint32(p, v)
	}
}

// prepareProgressThread readies sm.progress=thread when the endpoint is
// made, outside any timed loop: it registers the process barrier and
// starts the goroutine, which parks on its own thread, costing nothing,
// until the first operation above the eager limit wakes it. Why here and
// not at the first large operation: registering waits for an RCU grace
// period (milliseconds), which would land inside the caller's timed Isend.
//
// It returns once the goroutine has its own thread: the go statement only
// queues the goroutine, and the thread it locks is often a fresh one (a
// clone), which would otherwise be made while the first sizes are timed.
func (e *Endpoint) prepareProgressThread() {
	e.dormant, e.dormantFlag = true, 1
	e.fenced = sys.RegisterProcessBarrier() == nil
	e.wake = make(chan struct{}, 1)
	e.stopProgress = make(chan struct{})
	e.progressDone = make(chan struct{})
	locked := make(chan struct{})
	go e.progressLoop(locked)
	<-locked
}

// stopProgressThread ends the progress goroutine, parked or not, and
// waits for it: after it returns, the caller is the engine's only user.
func (e *Endpoint) stopProgressThread() {
	if e.progressDone == nil {
		return
	}
	close(e.stopProgress)
	<-e.progressDone
}

// park blocks the progress goroutine until wakeProgress (true) or a stop
// (false). It returns at once if the endpoint is awake already.
func (e *Endpoint) park() bool {
	atomic.StoreUint32(&e.parked, 1)
	if e.fenced {
		// Paired with wakeProgress's plain store of dormantFlag, as
		// tryTake's barrier with appIn.
		if err := sys.ProcessBarrier(); err != nil {
			e.fenced = false // cannot happen once registered; never risk it
		}
	}
	if atomic.LoadUint32(&e.dormantFlag) == 0 && atomic.CompareAndSwapUint32(&e.parked, 1, 0) {
		return true // woken before it slept: no token comes
	}
	return e.awaitWake() // dormant, or the application took parked back and its token comes
}

// awaitWake blocks until the application's token (true) or a stop (false).
func (e *Endpoint) awaitWake() bool {
	select {
	case <-e.wake:
		return true
	case <-e.stopProgress:
		return false
	}
}

func (e *Endpoint) progressLoop(locked chan<- struct{}) {
	runtime.LockOSThread()
	e.progressTID = sys.Gettid()
	atomic.StoreUint32(&e.parked, 1)
	close(locked)
	defer close(e.progressDone)
	if !e.awaitWake() { // parked from the start: see park
		return
	}
	timer := time.NewTimer(progressMaxSleep)
	timer.Stop()
	pause := func(d time.Duration) bool { // false: stop
		timer.Reset(d)
		select {
		case <-e.stopProgress:
			timer.Stop()
			return false
		case <-timer.C:
			return true
		}
	}
	// A wake comes from a communicating application (a large operation
	// in hand): a first pass at once could only find it busy, and would
	// take a rank's CPU to learn that.
	sleep := progressBusySleep
	wakes := atomic.LoadUint32(&e.wakes)
	var calls uint64
	for {
		if !pause(sleep) || e.abort.Load() != nil {
			return
		}
		if atomic.LoadUint32(&e.dormantFlag) != 0 {
			// Nothing open needs the goroutine. The flag is a hint here
			// (progressPass checks it owning the engine); testing it
			// first keeps the barrier's interrupt off the application.
			// Park once a whole sleep has passed with no wake: an
			// application alternating large and small operations would
			// otherwise pay a thread wake-up for each large one.
			if w := atomic.LoadUint32(&e.wakes); w != wakes {
				wakes = w
				sleep = busier(sleep) // the application is at work
				continue
			}
			if !e.park() {
				return
			}
			wakes = atomic.LoadUint32(&e.wakes)
			sleep = progressBusySleep
			continue
		}
		moved, busy := e.progressPass(&calls)
		drained := moved
		for moved {
			// Work is flowing (a pipelined message draining, say): go on
			// at once, but let a stop request through.
			select {
			case <-e.stopProgress:
				return
			default:
			}
			if e.abort.Load() != nil {
				return
			}
			moved, busy = e.progressPass(&calls)
		}
		switch {
		case busy:
			// The application progresses by itself: stay out of its way
			// at once rather than ramping up from progressMinSleep, which
			// woke the goroutine about ten times in the first 10 ms of
			// every busy stretch, each wake taking a rank's CPU.
			sleep = busier(sleep)
		case drained:
			sleep = progressMinSleep // ramp up afresh after a stretch of work
		default:
			sleep = min(2*sleep, progressMaxSleep)
		}
	}
}

// progressPass advances the engine once if the application is neither in
// it nor has called in since the last pass (*calls); busy says it had.
func (e *Endpoint) progressPass(calls *uint64) (moved, busy bool) {
	if !e.tryTake() {
		return false, true
	}
	defer e.release()
	if atomic.LoadUint32(&e.dormantFlag) != 0 {
		return false, false // the application needs nothing: it touches nothing here
	}
	busy = e.calls != *calls
	*calls = e.calls
	if busy || !e.needsProgress() {
		// Calling in, or about to doze on its next exit: the
		// application's own work is all there is.
		return false, true
	}
	return e.progress(), false
}
