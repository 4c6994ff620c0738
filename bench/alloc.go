package bench

import (
	"fmt"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/hostmem"
)

// The alloc (alloc-churn) pattern is bw with a message-buffer allocator in
// the loop: every buffer comes from the rank's hostmem.Allocator right
// before its send or receive is posted and goes back right after the window
// completes, on both ranks. What it measures is the transport plus the
// allocator's policy (cache size, purge, huge pages: options alloc.*), the
// way an application that allocates per message sees them.

// churn is a rank's allocator and the buffers of the window in flight.
type churn struct {
	heap *hostmem.Allocator
	bufs [][]byte
}

// newChurnArena is newArena for the alloc pattern: no preallocated message
// buffers, an allocator configured from the spec's options, and the ack.
func newChurnArena(spec Spec) (*arena, error) {
	cfg, err := hostmem.ParseConfig(spec.Options)
	if err != nil {
		return nil, err
	}
	heap, err := hostmem.New(cfg)
	if err != nil {
		return nil, err
	}
	ack, err := Alloc(4)
	if err != nil {
		heap.Close()
		return nil, err
	}
	return &arena{ack: ack, heap: heap, mapped: [][]byte{ack}}, nil
}

// churnWindow: rank 0 allocates and sends a window, rank 1 allocates and
// receives it; both free the window's buffers once it has completed (rank 1
// after checking them); then a 1-byte acknowledgement.
func (l *loop) churnWindow(i int) error {
	c := l.churn
	l.reqs, c.bufs = l.reqs[:0], c.bufs[:0]
	for w := range l.window {
		b, err := c.heap.Alloc(l.size)
		if err != nil {
			return err
		}
		c.bufs = append(c.bufs, b)
		var q transports.Request
		if l.rank == 0 {
			if err = l.fill(b, i, 0, w); err != nil {
				return err
			}
			q, err = l.t.Isend(l.peer, b)
		} else {
			q, err = l.t.Irecv(l.peer, b)
		}
		if err != nil {
			return err // buffers of posted operations stay allocated: the run is over
		}
		l.reqs = append(l.reqs, q)
	}
	if err := l.t.Wait(l.reqs...); err != nil {
		return err
	}
	for w, b := range c.bufs {
		if l.rank == 1 {
			if err := l.check(b, i, 0, w); err != nil {
				return err
			}
		}
		if err := c.heap.Free(b); err != nil {
			return err
		}
	}
	ack := l.ack[:1]
	if l.rank == 0 {
		_, err := l.t.Recv(l.peer, ack)
		return err
	}
	return l.t.Send(l.peer, ack)
}

// hookInvalidation hooks the transport's invalidation (ib's registration
// cache) to the alloc pattern's allocator, so that a buffer purged or
// unmapped between messages is never used again through a stale
// registration; the returned function unhooks it (before the transport
// closes). Nothing to do for other patterns or transports.
func (a *arena) hookInvalidation(t transports.Transport) (unhook func()) {
	inv, ok := t.(transports.Invalidator)
	if a.heap == nil || !ok {
		return func() {}
	}
	return a.heap.OnRelease(inv.Invalidate)
}

// checkOptions accepts the allocator's options (alloc.*, regcache.*) next
// to any transport's, checking their values, and the rest against the
// registered transports.
func checkOptions(o transports.Options) error {
	_, rest, err := hostmem.SplitOptions(o)
	if err != nil {
		return fmt.Errorf("options: %w", err)
	}
	return transports.CheckKeys(rest)
}
