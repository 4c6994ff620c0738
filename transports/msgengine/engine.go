package msgengine

import (
	"fmt"
	"time"

	"github.com/gotune/gotune/internal/queue"
	"github.com/gotune/gotune/transports"
)

// Request is the state every send or receive has, whatever carries it. A
// transport embeds it in its own request type (or uses it as it is).
type Request struct {
	Buf     []byte
	Send    bool
	Rndv    bool   // goes (or went) by rendezvous
	Seq     uint32 // its place in the pair's order
	Rank    int    // the peer's rank
	N       int    // bytes moved (a receive: taken)
	MsgLen  int    // a receive: the message's length
	Pending int    // the transport's count of parts still due
	done    bool
	err     error
}

// Done, Len and Err make a Request a transports.Request.
func (r *Request) Done() bool { return r.done }
func (r *Request) Len() int   { return r.N }
func (r *Request) Err() error { return r.err }

func (r *Request) core() *Request { return r }

// Req is a pointer to a transport's request type T, which embeds Request.
type Req[T any] interface {
	*T
	transports.Request
	core() *Request
}

// Peer is the matching state of one pair of ranks; a transport embeds it in
// its peer and hands it to AddPeer. R is the transport's request pointer,
// A its arrival (a message that came before its receive).
type Peer[R, A any] struct {
	Rank             int
	SendSeq, RecvSeq uint32
	Posted           queue.FIFO[R] // receives not yet matched with an arrival
	Unexpected       queue.FIFO[A] // arrivals not yet matched with a receive
	RndvRecv         []R           // rendezvous receives waiting for their payload
	Err              error         // the pair has failed: every later operation ends with it
}

// Hooks are what a transport does for the engine.
type Hooks[R, A any] struct {
	// Start puts a numbered send on the wire; its pair has not failed.
	Start func(r R)
	// Match hands a numbered receive the oldest unexpected arrival.
	Match func(r R, a A)
	// Progress moves whatever can move without blocking and reports
	// whether anything did.
	Progress func() bool
	// Sleep blocks until something may move, or a short while; nil: Wait
	// only spins.
	Sleep func()
	// Release, when set, is called as a request completes, before it is
	// marked done (to drop what the request held).
	Release func(r R)
}

// Spin is how long Wait drives progress without result before it sleeps.
const Spin = 50 * time.Microsecond

// Engine matches and completes one rank's requests with its peers. T is the
// transport's request type, R a pointer to it, A its arrival.
type Engine[T any, R Req[T], A any] struct {
	name       string // the transport's name: errors start with it
	rank, size int
	eager      int // the eager limit: longer messages go by rendezvous
	closed     bool
	hooks      Hooks[R, A]
	peers      []*Peer[R, A]
	free       queue.FreeList[T]
	bufs       [][]byte // eager buffers of unexpected messages, recycled
}

// Init readies the engine of the transport name for rank of a job of size
// ranks.
func (e *Engine[T, R, A]) Init(name string, rank, size, eager int, h Hooks[R, A]) {
	e.name, e.rank, e.size, e.eager, e.hooks = name, rank, size, eager, h
	e.peers = make([]*Peer[R, A], size)
}

// Name is the transport's name.
func (e *Engine[T, R, A]) Name() string { return e.name }

// AddPeer makes p the pair with rank p.Rank.
func (e *Engine[T, R, A]) AddPeer(p *Peer[R, A]) { e.peers[p.Rank] = p }

// Shut marks the engine closed (Isend and Irecv fail from now on); it
// reports whether it already was.
func (e *Engine[T, R, A]) Shut() (already bool) {
	already, e.closed = e.closed, true
	return already
}

// peer checks a peer rank.
func (e *Engine[T, R, A]) peer(rank int) (*Peer[R, A], error) {
	if rank < 0 || rank >= e.size || rank == e.rank {
		return nil, fmt.Errorf("%s: rank %d has no peer %d (job of %d)", e.name, e.rank, rank, e.size)
	}
	if e.closed {
		return nil, fmt.Errorf("%s: transport closed", e.name)
	}
	return e.peers[rank], nil
}

// newRequest takes a recycled request for a send or receive of buf with
// peer and gives it the pair's next sequence number in its direction.
func (e *Engine[T, R, A]) newRequest(peer int, buf []byte, send bool) (R, *Peer[R, A], error) {
	p, err := e.peer(peer)
	if err != nil {
		return nil, nil, err
	}
	r := R(e.free.Get())
	c := r.core()
	c.Buf, c.Send, c.Rank = buf, send, p.Rank
	seq := &p.RecvSeq
	if send {
		seq = &p.SendSeq
	}
	c.Seq = *seq
	*seq++
	return r, p, nil
}

// Isend numbers a send of buf to peer and starts it (or ends it with the
// pair's error).
func (e *Engine[T, R, A]) Isend(peer int, buf []byte) (transports.Request, error) {
	r, p, err := e.newRequest(peer, buf, true)
	if err != nil {
		return nil, err
	}
	if p.Err != nil {
		e.Finish(r, p.Err)
	} else {
		e.hooks.Start(r)
	}
	return r, nil
}

// Irecv numbers a receive of the next message from peer into buf and
// matches it with the oldest unexpected arrival, or posts it (or ends it
// with the pair's error).
func (e *Engine[T, R, A]) Irecv(peer int, buf []byte) (transports.Request, error) {
	r, p, err := e.newRequest(peer, buf, false)
	switch {
	case err != nil:
		return nil, err
	case p.Unexpected.Len() > 0:
		e.hooks.Match(r, p.Unexpected.Pop())
	case p.Err != nil:
		e.Finish(r, p.Err)
	default:
		p.Posted.Push(r)
	}
	return r, nil
}

// Deliver hands an arrival to the oldest posted receive (Match), or queues
// it as unexpected.
func (e *Engine[T, R, A]) Deliver(p *Peer[R, A], a A) {
	if p.Posted.Len() > 0 {
		e.hooks.Match(p.Posted.Pop(), a)
		return
	}
	p.Unexpected.Push(a)
}

// Send is Isend and Wait.
func (e *Engine[T, R, A]) Send(peer int, buf []byte) error {
	r, err := e.Isend(peer, buf)
	if err != nil {
		return err
	}
	return e.Wait(r)
}

// Recv is Irecv and Wait; it returns the message's length.
func (e *Engine[T, R, A]) Recv(peer int, buf []byte) (int, error) {
	r, err := e.Irecv(peer, buf)
	if err != nil {
		return 0, err
	}
	c := r.(R).core()
	err = e.Wait(r)
	return c.N, err
}

// Finish completes r with err (nil: success); a request completes once. A
// send that succeeds has moved its whole buffer, one that fails nothing.
func (e *Engine[T, R, A]) Finish(r R, err error) {
	c := r.core()
	if c.done {
		return
	}
	if e.hooks.Release != nil {
		e.hooks.Release(r)
	}
	c.done, c.err = true, err
	if c.Send {
		c.N = len(c.Buf)
		if err != nil {
			c.N = 0
		}
	}
}

// FinishRecv completes a receive whose bytes are all in: it fails with
// transports.ErrTruncated when the message was longer than the buffer.
func (e *Engine[T, R, A]) FinishRecv(r R) {
	c := r.core()
	var err error
	if c.MsgLen > len(c.Buf) {
		err = fmt.Errorf("%s: message of %d bytes from rank %d into %d: %w", e.name, c.MsgLen, c.Rank, len(c.Buf), transports.ErrTruncated)
	}
	e.Finish(r, err)
}

// Fail records err as the pair's failure, unless it has one already (then
// it reports false and does nothing), and ends its posted receives and
// rendezvous receives with it. The transport ends what else it holds.
func (e *Engine[T, R, A]) Fail(p *Peer[R, A], err error) bool {
	if p.Err != nil {
		return false
	}
	p.Err = err
	e.FailAll(p.Posted.All(), err)
	e.FailAll(p.RndvRecv, err)
	p.Posted.Reset()
	p.RndvRecv = nil
	return true
}

// FailAll ends every request of rs with err, naming its operation.
func (e *Engine[T, R, A]) FailAll(rs []R, err error) {
	for _, r := range rs {
		e.Finish(r, e.OpErr(r, err))
	}
}

// OpErr names the operation that err ended: eager or rendezvous, send or
// receive, its size and its peer.
func (e *Engine[T, R, A]) OpErr(r R, err error) error {
	c := r.core()
	op := "eager"
	if c.Rndv || (!c.Send && c.MsgLen > e.eager) || len(c.Buf) > e.eager {
		op = "rendezvous"
	}
	if c.Send {
		return fmt.Errorf("%s send of %d bytes to rank %d: %w", op, len(c.Buf), c.Rank, err)
	}
	return fmt.Errorf("%s receive into %d bytes from rank %d: %w", op, len(c.Buf), c.Rank, err)
}

// Wait drives progress until every request is done, then recycles them (a
// request must not be used after Wait returns); it returns the first
// request's error, in the order given.
func (e *Engine[T, R, A]) Wait(reqs ...transports.Request) error {
	var idleSince time.Time
	for !allDone(reqs) {
		if e.hooks.Progress() {
			idleSince = time.Time{}
			continue
		}
		if e.hooks.Sleep == nil {
			continue
		}
		if idleSince.IsZero() {
			idleSince = time.Now()
			continue
		}
		if time.Since(idleSince) < Spin {
			continue
		}
		e.hooks.Sleep()
	}
	var first error
	for _, q := range reqs {
		r := q.(R)
		if err := r.core().err; err != nil && first == nil {
			first = err
		}
		e.free.Put((*T)(r))
	}
	return first
}

func allDone(reqs []transports.Request) bool {
	for _, q := range reqs {
		if !q.Done() {
			return false
		}
	}
	return true
}

// EagerBuf is a buffer of eager-limit bytes for an unexpected message.
func (e *Engine[T, R, A]) EagerBuf() []byte {
	if k := len(e.bufs); k > 0 {
		b := e.bufs[k-1]
		e.bufs = e.bufs[:k-1]
		return b
	}
	return make([]byte, e.eager)
}

// PutEagerBuf recycles a buffer EagerBuf gave.
func (e *Engine[T, R, A]) PutEagerBuf(b []byte) {
	if cap(b) == e.eager {
		e.bufs = append(e.bufs, b[:cap(b)])
	}
}

// Find is the request of rs with sequence number seq, or nil.
func Find[R interface{ core() *Request }](rs []R, seq uint32) (R, bool) {
	for _, r := range rs {
		if r.core().Seq == seq {
			return r, true
		}
	}
	var zero R
	return zero, false
}

// Remove drops r from rs.
func Remove[R comparable](rs []R, r R) []R {
	for i, q := range rs {
		if q == r {
			return append(rs[:i], rs[i+1:]...)
		}
	}
	return rs
}

// PartDone accounts one finished part (a chunk of a rendezvous payload)
// of the request with sequence number seq in *rs; when it was the last,
// it removes the request and returns it with true.
func PartDone[R interface {
	comparable
	core() *Request
}](rs *[]R, seq uint32) (R, bool) {
	r, ok := Find(*rs, seq)
	if !ok {
		return r, false
	}
	c := r.core()
	c.Pending--
	if c.Pending != 0 {
		return r, false
	}
	*rs = Remove(*rs, r)
	return r, true
}

// Take removes the request with sequence number seq from *rs and returns
// it; false when there is none.
func Take[R interface {
	comparable
	core() *Request
}](rs *[]R, seq uint32) (R, bool) {
	r, ok := Find(*rs, seq)
	if ok {
		*rs = Remove(*rs, r)
	}
	return r, ok
}
