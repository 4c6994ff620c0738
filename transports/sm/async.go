package sm

import (
	"runtime"
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
// Hand-off: one owner word. Every entry point of the engine takes it with
// one compare-and-swap (free → application) and gives it back with one
// store; the progress goroutine takes it only when it is free (free →
// progress), runs one pass over the channels and gives it back. The engine
// state is never touched by both at once, and the word's atomics order
// their accesses. When idle the goroutine sleeps, backing off from
// progressMinSleep to progressMaxSleep, so it costs one wake-up per
// millisecond, not a spinning core. With polling progress (the default) the
// entry points test one boolean of the endpoint and touch no atomic.

const (
	ownerFree uint32 = iota
	ownerApp
	ownerProgress
)

const (
	progressMinSleep = 20 * time.Microsecond
	progressMaxSleep = time.Millisecond
)

// enter makes the application the owner of the engine.
func (e *Endpoint) enter() {
	if !e.owner.CompareAndSwap(ownerFree, ownerApp) {
		e.enterSlow()
	}
}

// enterSlow waits out the progress thread's current pass, which is short;
// the application never waits for its sleep.
func (e *Endpoint) enterSlow() {
	for spin := 0; ; spin++ {
		if e.owner.Load() == ownerFree && e.owner.CompareAndSwap(ownerFree, ownerApp) {
			return
		}
		if spin < tightSpins {
			sys.CPURelax()
		} else {
			sys.Yield() // the pass may have been preempted: let it finish
		}
	}
}

func (e *Endpoint) exit() { e.owner.Store(ownerFree) }

func (e *Endpoint) startProgressThread() {
	e.async = true
	e.stopProgress = make(chan struct{})
	e.progressDone = make(chan struct{})
	go e.progressLoop()
}

// stopProgressThread ends the progress goroutine and waits for it: after
// it returns, the caller is the engine's only user.
func (e *Endpoint) stopProgressThread() {
	close(e.stopProgress)
	<-e.progressDone
}

func (e *Endpoint) progressLoop() {
	runtime.LockOSThread()
	defer close(e.progressDone)
	timer := time.NewTimer(progressMaxSleep)
	timer.Stop()
	sleep := progressMinSleep
	for {
		if e.abort.Load() != nil {
			return
		}
		moved := false
		if e.owner.CompareAndSwap(ownerFree, ownerProgress) {
			moved = e.progress()
			e.owner.Store(ownerFree)
		}
		if moved {
			// Work is flowing (a pipelined message draining, say): go on
			// at once, but let a stop request through.
			sleep = progressMinSleep
			select {
			case <-e.stopProgress:
				return
			default:
			}
			continue
		}
		timer.Reset(sleep)
		select {
		case <-e.stopProgress:
			timer.Stop()
			return
		case <-timer.C:
		}
		sleep = min(2*sleep, progressMaxSleep)
	}
}
