package sm

import (
	"fmt"
	"slices"

	"github.com/gotune/gotune/transports"
)

// Persistent requests (MPI_Send_init, MPI_Recv_init, MPI_Start).
//
// A persistent request is set up once (peer, buffer, request object) and
// started many times; Wait completes each start and leaves the request
// inactive, ready for the next, instead of recycling it. Free releases it.
//
// FIFO credits. Every channel has Depth persistent credits, one per cell
// of its ring, and a persistent send needs one to be in flight: persistent
// operations in flight on a channel never outnumber its cells (as NCCL's
// work FIFO bounds the work in flight). SendInit reserves a free credit
// when there is one, and the request keeps it across its starts, so a
// restart costs a queue push and, with room in the ring, one published
// cell, and no credit accounting. Free returns the reservation. A start
// that finds no free credit takes one back from a live persistent send
// that is not in flight (inactive, or complete but not yet waited for);
// failing that, it waits at the head of its send queue, in order, until
// one of the sends in flight completes. Only operations in flight can make
// it wait, and they complete by progress: a start never waits on the
// application.
//
// Hazard H3 (nccl#1251's shape): with sm.persist=leak, Free forgets to
// return the reservation. The freed request is no longer a live send that
// a credit could be taken back from, so every leak loses one credit for
// good; after Depth leaks on a channel the next persistent start waits
// forever, and every send queued behind it with it.

var _ transports.Persistent = (*Endpoint)(nil)

// persistentRequest is what SendInit and RecvInit return.
type persistentRequest struct{ request }

// SendInit sets up a persistent send of buf to rank to.
func (e *Endpoint) SendInit(to int, buf []byte) (transports.PersistentRequest, error) {
	if e.async {
		e.enter()
		defer e.exit()
	}
	p, err := e.peer(to)
	if err != nil {
		return nil, err
	}
	q := &persistentRequest{request{ep: e, peer: p, buf: buf, isSend: true, persistent: true}}
	if e.mem != nil && !e.classify(&q.request) {
		return nil, q.err
	}
	if p.credits > 0 {
		p.credits--
		q.credit = true
	}
	p.persist = append(p.persist, &q.request)
	e.livePersistent++
	return q, nil
}

// RecvInit sets up a persistent receive from rank from into buf.
func (e *Endpoint) RecvInit(from int, buf []byte) (transports.PersistentRequest, error) {
	if e.async {
		e.enter()
		defer e.exit()
	}
	p, err := e.peer(from)
	if err != nil {
		return nil, err
	}
	q := &persistentRequest{request{ep: e, peer: p, buf: buf, persistent: true}}
	if e.mem != nil && !e.classify(&q.request) {
		return nil, q.err
	}
	e.livePersistent++
	return q, nil
}

// PersistentCredits reports, for the channel to rank to, how many
// persistent credits no live persistent send holds, and how many there are
// (the FIFO depth).
func (e *Endpoint) PersistentCredits(to int) (free, total int, err error) {
	if e.async {
		e.acquire()
		defer e.exit()
	}
	p, err := e.peer(to)
	if err != nil {
		return 0, 0, err
	}
	return p.credits, e.params.Depth, nil
}

// Start begins one operation of an inactive persistent request.
func (q *persistentRequest) Start() error {
	r := &q.request
	e := r.ep
	e.startProgressFor(len(r.buf))
	if e.async {
		e.enter()
		defer e.exit()
	}
	switch {
	case r.freed:
		return fmt.Errorf("%s: start of a freed persistent request", e.name)
	case r.active:
		return fmt.Errorf("%s: start of an active persistent request (%s): wait for it first", e.name, r.describe())
	case r.orphan:
		return fmt.Errorf("%s: start of a persistent request that failed mid-operation (%v): free it", e.name, r.err)
	}
	if err := e.abort.Load(); err != nil {
		return *err
	}
	r.active, r.done, r.n, r.err, r.off, r.id, r.waiting = true, false, 0, nil, 0, 0, false
	r.parts, r.splitErr = 0, nil
	p := r.peer
	if r.isSend {
		e.postSend(p, r)
		return nil
	}
	r.proto = protoEager
	e.postRecv(p, r)
	return nil
}

// Free releases an inactive persistent request and returns its credit.
func (q *persistentRequest) Free() error {
	r := &q.request
	e := r.ep
	if e.async {
		e.enter()
		defer e.exit()
	}
	switch {
	case r.freed:
		return fmt.Errorf("%s: persistent request freed twice", e.name)
	case r.active:
		return fmt.Errorf("%s: free of an active persistent request (%s): wait for it first", e.name, r.describe())
	}
	r.freed = true
	e.livePersistent--
	if !r.isSend {
		return nil
	}
	p := r.peer
	p.persist = slices.DeleteFunc(p.persist, func(x *request) bool { return x == r })
	if r.credit {
		r.credit = false
		if !e.params.LeakPersistent { // sm.persist=leak forgets this: hazard H3
			p.credits++
		}
	}
	return nil
}

// takeCredit gives persistent send r a credit of channel p: a free one, or
// one taken back from a live persistent send that is not in flight. It
// fails while every credit is held by a send in flight (or was leaked).
func (e *Endpoint) takeCredit(p *peer, r *request) bool {
	if p.credits > 0 {
		p.credits--
		r.credit = true
		return true
	}
	for _, q := range p.persist {
		if q.credit && (!q.active || q.done) {
			q.credit, r.credit = false, true
			return true
		}
	}
	return false
}
