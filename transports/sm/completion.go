package sm

import "fmt"

// EventCopy is implemented by a SingleCopy whose copies finish after the
// call that queues them, each marked by an event that both processes can
// observe (CUDA IPC's interprocess events). The copying side queues the copy
// with Start and answers FIN at once, carrying the token; each side then
// completes its request when Done reports the copy finished: the copying
// side on its own event, the other on the copying side's. Neither waits for
// the other to notice, so a rank that stops calling in holds up nobody's
// completion, and a window of copies is in flight at once.
type EventCopy interface {
	SingleCopy
	// Start queues the copy that Copy would make and returns its token,
	// which is never 0.
	Start(pid int, local []byte, at Place, remote uintptr, pull bool) (token uint64, err error)
	// Done reports whether the copy behind token, which rank started,
	// has finished.
	Done(rank int, token uint64) (bool, error)
}

// MarkFlusher is implemented by an EventCopy whose Start may leave the
// mark behind the token it returns unqueued until FlushMarks, so that the
// copies one progress pass starts share one mark: a side that polls the
// token before then finds the copy unfinished, never finished. The engine
// flushes at the end of every progress pass that follows copies started
// (in the pass itself, or while posting: feedPushes), so every Wait,
// Progress and Close flushes. Why: on a copy engine each mark costs a
// pause between copies (docs/performance.md, GPU). An error means the
// marks may never be reached: FlushMarks returns one only when nothing
// else could store them.
type MarkFlusher interface {
	FlushMarks() error
}

// inflight is a request whose bytes are moving under an EventCopy event.
type inflight struct {
	r     *request
	rank  int    // the rank that started the copy
	token uint64 // its event
	n     int    // bytes the request completes with
	err   error  // and its error (truncation), once the copy finished
}

// awaitCopy completes r with n and err once the copy behind token, started
// by rank, has finished.
func (e *Endpoint) awaitCopy(r *request, rank int, token uint64, n int, err error) {
	e.inflight = append(e.inflight, inflight{r: r, rank: rank, token: token, n: n, err: err})
}

// pollCopies completes the requests whose copies have finished and reports
// whether any did. A request completed meanwhile by other means (its peer
// exited) is dropped.
func (e *Endpoint) pollCopies() bool {
	moved := false
	keep := e.inflight[:0]
	for _, c := range e.inflight {
		if c.r.done {
			moved = true
			continue
		}
		finished, err := e.events.Done(c.rank, c.token)
		switch {
		case err != nil:
			c.r.complete(0, fmt.Errorf("%s: %s: completion of the copy rank %d started: %w", e.name, c.r.describe(), c.rank, err))
			moved = true
		case finished:
			c.r.complete(c.n, c.err)
			moved = true
		default:
			keep = append(keep, c)
		}
	}
	clear(e.inflight[len(keep):])
	e.inflight = keep
	return moved
}

// startCopy moves r's bytes by single copy and reports the copy's
// completion to the peer by FIN to id: at once with the event's token when
// the mechanism completes by events (r completes when the event does),
// else after the copy. n and done are what r completes with.
// handle is what the peer exported for remote (Exporter), 0 for none.
func (e *Endpoint) startCopy(p *peer, r *request, local []byte, remote uintptr, handle uint64, pull bool, id uint64, n int, done error) error {
	if e.events == nil {
		var err error
		if handle != 0 {
			err = e.export.CopyHandle(p.pid, local, r.place, handle, remote, pull)
		} else {
			err = e.single.Copy(p.pid, local, r.place, remote, pull)
		}
		if err != nil {
			return err
		}
		p.pulled = p.pulled || pull
		r.complete(n, done)
		e.queueCtrl(p, kindFIN, id, finOK, 0, 0)
		return nil
	}
	token, err := e.events.Start(p.pid, local, r.place, remote, pull)
	if err != nil {
		return err
	}
	e.marksDue = e.flusher != nil
	e.awaitCopy(r, e.rank, token, n, done)
	e.queueCtrl(p, kindFIN, id, finOK, 0, token)
	return nil
}

// feedPushes, after r is posted, answers what p has sent towards a push
// for a posted request (takeRendezvous): a clear-to-send for one of this
// rank's sends (its copy starts), a request-to-send that a posted receive
// takes by push (the clear-to-send goes back), and the completions
// between them. So while a window of pinned-to-device messages is posted,
// the copy engine already moves its first ones: the posting loops
// otherwise leave it idle, about 1 µs a message at 1 MiB
// (docs/performance.md, GPU). Only over an EventCopy mechanism, for sends
// from pinned memory and receives into device memory, and never a pull:
// starting device-to-device pulls while posting cost their bandwidth (the
// same page). It stops at the first other cell, or at a fast-box message
// due first, leaving them to the passes; the marks of copies it starts
// wait for the next pass.
func (e *Endpoint) feedPushes(p *peer, r *request) {
	if e.events != nil { // small enough to inline: host messages pay one compare
		e.feedPushesFor(p, r)
	}
}

// feedPushesFor is feedPushes over an EventCopy mechanism.
func (e *Endpoint) feedPushesFor(p *peer, r *request) {
	if r.done || !(r.isSend && r.place == PlacePinned || !r.isSend && r.place == PlaceDevice) {
		return
	}
	moved := false
feed:
	for {
		h := p.rx.peek()
		if h == nil {
			break
		}
		if _, due := p.box.due(p.rx.head.n); due { // after peek: see box.go
			break
		}
		body := p.rx.body()
		switch h.kind {
		case kindCTS, kindFIN: // a FIN: an earlier push's, ahead of the next request-to-send
		case kindRTS:
			if w := getWords(body); p.recvq.Len() == 0 || e.routeFor(int(w[0]), Place(w[3]), p.recvq.Front().place) != RoutePush {
				break feed
			}
		default:
			break feed
		}
		e.takeRendezvous(p, h.kind, body)
		moved = true
	}
	if moved {
		e.pushSends(p, false)
	}
}

// flushMarks queues the marks of the copies started since the last flush
// (MarkFlusher). If that fails, the copies this rank started never report
// finished: their requests fail with the error.
func (e *Endpoint) flushMarks() {
	if e.marksDue { // inlined: a polling pass with nothing started pays one compare
		e.flushDueMarks()
	}
}

// flushDueMarks is flushMarks with copies started since the last flush.
func (e *Endpoint) flushDueMarks() {
	e.marksDue = false
	err := e.flusher.FlushMarks()
	if err == nil {
		return
	}
	for _, c := range e.inflight {
		if c.rank == e.rank && !c.r.done {
			c.r.complete(0, fmt.Errorf("%s: %s: mark the copies started: %w", e.name, c.r.describe(), err))
		}
	}
}
