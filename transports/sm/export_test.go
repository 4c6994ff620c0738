package sm

import (
	"sync/atomic"
	"time"
)

// ProgressAwake reports whether the endpoint's entry points take the
// hand-off with a progress goroutine (not dormant).
func (e *Endpoint) ProgressAwake() bool { return e.async }

// ProgressParked reports whether the progress goroutine waits for a wake.
func (e *Endpoint) ProgressParked() bool { return atomic.LoadUint32(&e.parked) != 0 }

// ProgressExited reports whether the endpoint's progress goroutine, made
// by New with sm.progress=thread, has returned.
func (e *Endpoint) ProgressExited() bool {
	select {
	case <-e.progressDone:
		return true
	default:
		return false
	}
}

// ProgressThread is the thread the progress goroutine locked before New
// returned (0: none).
func (e *Endpoint) ProgressThread() int { return e.progressTID }

// SetClock replaces the clock that times sm.park; call it before the
// endpoint's first operation.
func (e *Endpoint) SetClock(now func() time.Time) { e.clock = now }

// EarlyArrivals counts the messages parked in the unexpected queues: those
// that arrived before their receive and were copied twice.
func (e *Endpoint) EarlyArrivals() uint64 { return e.early }

// BoxMessages counts the messages this endpoint sent to peer through
// their fast box.
func (e *Endpoint) BoxMessages(peer int) int {
	b := e.peers[peer].box
	return int(b.last+b.mine) / 2 // the box's messages alternate, this rank's odd or even
}

// PackedMessages is how many messages this rank has packed for peer.
func (e *Endpoint) PackedMessages(peer int) int { return e.peers[peer].pack.sent }
