package nccl

import (
	"errors"
	"fmt"
	"time"

	"github.com/gotune/gotune/internal/cuda"
	libnccl "github.com/gotune/gotune/internal/nccl"
	"github.com/gotune/gotune/transports"
)

// request is one send or receive. It is queued until its group is
// launched, then complete once the group's event is.
type request struct {
	peer  int
	send  bool
	buf   []byte
	stage *cuda.Buffer // device scratch for a pageable host buffer
	group *group
	done  bool
	err   error
}

func (r *request) Done() bool { return r.done }
func (r *request) Len() int   { return len(r.buf) }
func (r *request) Err() error { return r.err }

// group is the operations launched by one ncclGroupStart/End and the
// event recorded after them.
type group struct {
	ev   *cuda.Event
	reqs []*request
}

// queue holds a rank's operations: those queued and not yet launched,
// and the launched groups in launch order, with the events and scratch
// they may reuse.
type queue struct {
	stream   *cuda.Stream
	pending  []*request
	launched []*group
	events   []*cuda.Event  // free
	scratch  []*cuda.Buffer // free device scratch for pageable buffers
	dev      *cuda.Device
	asked    time.Time // when NCCL's asynchronous error was last asked
}

// asyncErrorPeriod is how often a waiting rank asks NCCL for an
// asynchronous error.
const asyncErrorPeriod = time.Millisecond

// Isend queues a send of buf to peer.
func (t *Transport) Isend(peer int, buf []byte) (transports.Request, error) {
	return t.post(peer, buf, true)
}

// Irecv queues the receipt of exactly len(buf) bytes from peer.
func (t *Transport) Irecv(peer int, buf []byte) (transports.Request, error) {
	return t.post(peer, buf, false)
}

func (t *Transport) post(peer int, buf []byte, send bool) (*request, error) {
	if t.closed {
		return nil, errors.New("nccl: transport closed")
	}
	if peer == t.rank {
		return nil, fmt.Errorf("nccl: rank %d cannot send to itself", peer)
	}
	r := &request{peer: peer, send: send, buf: buf}
	t.q.pending = append(t.q.pending, r)
	return r, nil
}

// Send sends buf to peer and waits until its buffer may be reused.
func (t *Transport) Send(peer int, buf []byte) error {
	r, err := t.post(peer, buf, true)
	if err != nil {
		return err
	}
	return t.Wait(r)
}

// Recv receives exactly len(buf) bytes from peer.
func (t *Transport) Recv(peer int, buf []byte) (int, error) {
	r, err := t.post(peer, buf, false)
	if err != nil {
		return 0, err
	}
	if err := t.Wait(r); err != nil {
		return 0, err
	}
	return len(buf), nil
}

// Wait launches what is queued and polls the groups' events until every
// request given has completed.
func (t *Transport) Wait(reqs ...transports.Request) error {
	if err := t.launch(); err != nil {
		return err
	}
	for _, q := range reqs {
		r, ok := q.(*request)
		if !ok {
			return fmt.Errorf("nccl: wait for a %T, not a request of this transport", q)
		}
		for !r.done {
			if err := t.complete(); err != nil {
				return err
			}
		}
	}
	var first error
	for _, q := range reqs {
		if err := q.Err(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// launch issues every queued operation as one NCCL group on the rank's
// stream and records an event after it. A pageable send buffer is copied
// into scratch first, on the same stream, ahead of the group.
func (t *Transport) launch() error {
	if len(t.q.pending) == 0 {
		return nil
	}
	reqs := t.q.pending
	t.q.pending = nil
	fail := func(err error) error {
		t.failed = true
		for _, r := range reqs {
			r.done, r.err = true, err
			if r.stage != nil {
				t.q.scratch = append(t.q.scratch, r.stage)
				r.stage = nil
			}
		}
		return err
	}
	for _, r := range reqs {
		if err := t.q.stageIn(r); err != nil {
			return fail(err)
		}
	}
	err := t.issue(reqs, func() error {
		if err := t.lib.GroupStart(); err != nil {
			return err
		}
		var issueErr error
		for _, r := range reqs {
			addr := r.addr()
			if r.send {
				issueErr = t.lib.Send(addr, r.count(), libnccl.Int8, r.peer, t.comm, t.stream.Handle())
			} else {
				issueErr = t.lib.Recv(addr, r.count(), libnccl.Int8, r.peer, t.comm, t.stream.Handle())
			}
			if issueErr != nil {
				break
			}
		}
		// The group is closed even after a refused operation: NCCL's
		// group depth is per thread and must return to zero.
		return errors.Join(issueErr, t.lib.GroupEnd())
	})
	if err != nil {
		return fail(err)
	}
	return nil
}

// issue runs call, which queues reqs' work on the rank's stream, and
// records the event that completes them.
func (t *Transport) issue(reqs []*request, call func() error) error {
	if err := call(); err != nil {
		return fmt.Errorf("nccl: %w", err)
	}
	ev, err := t.q.event()
	if err != nil {
		return err
	}
	if err := ev.Record(t.stream); err != nil {
		t.q.events = append(t.q.events, ev)
		return fmt.Errorf("nccl: record the completion of queued work: %w", err)
	}
	g := &group{ev: ev, reqs: reqs}
	for _, r := range reqs {
		r.group = g
	}
	t.q.launched = append(t.q.launched, g)
	return nil
}

// complete finishes the oldest launched group if its event has completed
// (groups complete in launch order: one stream), copying staged receives
// out into each request's own error; it returns only what fails the
// transport: the event's poll, or NCCL's asynchronous error while the
// group is still running.
func (t *Transport) complete() error {
	if len(t.q.launched) == 0 {
		return errors.New("nccl: waiting for a request that was never launched")
	}
	g := t.q.launched[0]
	ok, err := g.ev.Query()
	if err != nil {
		t.failed = true
		return fmt.Errorf("nccl: poll the group's completion: %w", err)
	}
	if !ok {
		// NCCL's error word is asked at most once a millisecond: the
		// poll is a hot loop, and a peer's failure need not be seen
		// sooner.
		if now := time.Now(); now.Sub(t.q.asked) >= asyncErrorPeriod {
			t.q.asked = now
			if err := t.lib.AsyncError(t.comm); err != nil {
				t.failed = true
				return fmt.Errorf("nccl: rank %d: %w", t.rank, err)
			}
		}
		return nil
	}
	t.q.launched = t.q.launched[1:]
	t.q.events = append(t.q.events, g.ev)
	for _, r := range g.reqs {
		r.err = t.q.stageOut(r) // the request's own error, for whoever waits for it
		r.done = true
	}
	return nil
}

// count is the bytes NCCL moves: the buffer's, or one of scratch for an
// empty message.
func (r *request) count() int { return max(len(r.buf), 1) }

// addr is the address NCCL is given: the buffer's, or its scratch's.
func (r *request) addr() uintptr {
	if r.stage != nil {
		return r.stage.Ptr()
	}
	return addrOf(r.buf)
}

// stageIn gives a pageable host buffer device scratch (a send's bytes
// copied in); GPU-addressable buffers go to NCCL as they are. An empty
// message moves one byte of scratch: NCCL may complete a zero-byte
// operation without its peer, and an empty message is a synchronisation
// (a barrier's) that must wait for it.
func (q *queue) stageIn(r *request) error {
	if len(r.buf) > 0 {
		info, err := cuda.PointerAttributes(addrOf(r.buf))
		if err != nil {
			return fmt.Errorf("nccl: classify a %d-byte buffer: %w", len(r.buf), err)
		}
		if info.Type != cuda.MemoryUnregistered {
			return nil
		}
	}
	var err error
	if r.stage, err = q.take(len(r.buf)); err != nil {
		return err
	}
	if r.send && len(r.buf) > 0 {
		// On the rank's stream, so that NCCL's kernel, queued after it,
		// reads the bytes: a copy from pageable memory may return before
		// it has reached the device.
		if err := cuda.CopyAsync(r.stage.Ptr(), addrOf(r.buf), len(r.buf), q.stream); err != nil {
			return fmt.Errorf("nccl: stage a %d-byte send: %w", len(r.buf), err)
		}
	}
	return nil
}

// stageOut copies a staged receive out of its scratch and frees the
// scratch for reuse.
func (q *queue) stageOut(r *request) error {
	if r.stage == nil {
		return nil
	}
	var err error
	if !r.send && len(r.buf) > 0 {
		if err = cuda.CopyDtoH(r.buf, r.stage.Ptr()); err != nil {
			err = fmt.Errorf("nccl: copy out a %d-byte staged receive: %w", len(r.buf), err)
		}
	}
	q.scratch = append(q.scratch, r.stage)
	r.stage = nil
	return err
}

// take returns free scratch of at least n bytes, or new scratch.
func (q *queue) take(n int) (*cuda.Buffer, error) {
	for i, b := range q.scratch {
		if b.Len() >= n {
			q.scratch = append(q.scratch[:i], q.scratch[i+1:]...)
			return b, nil
		}
	}
	b, err := q.dev.Alloc(cuda.MemDevice, max(n, 4096))
	if err != nil {
		return nil, fmt.Errorf("nccl: scratch for a pageable buffer: %w", err)
	}
	return b, nil
}

// event returns a free completion event, or a new one.
func (q *queue) event() (*cuda.Event, error) {
	if n := len(q.events); n > 0 {
		ev := q.events[n-1]
		q.events = q.events[:n-1]
		return ev, nil
	}
	ev, err := cuda.NewEvent(cuda.EventDisableTiming)
	if err != nil {
		return nil, fmt.Errorf("nccl: completion event: %w", err)
	}
	return ev, nil
}

// close frees every event and scratch buffer, the launched groups' too.
func (q *queue) close() error {
	var errs []error
	for _, g := range q.launched {
		q.events = append(q.events, g.ev)
		for _, r := range g.reqs {
			if r.stage != nil {
				q.scratch = append(q.scratch, r.stage)
			}
		}
	}
	q.launched, q.pending = nil, nil
	for _, ev := range q.events {
		errs = append(errs, ev.Destroy())
	}
	for _, b := range q.scratch {
		errs = append(errs, b.Free())
	}
	q.events, q.scratch = nil, nil
	return errors.Join(errs...)
}
