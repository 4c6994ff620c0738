package tcp

// Progress: polling the connections, moving what can move, and failure.

import (
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/gotune/gotune/internal/queue"
	"github.com/gotune/gotune/internal/sys"
)

// block sleeps in poll(2) until a connection can move (or timeoutMs).
func (t *Transport) block(timeoutMs int) {
	t.pollEvents(true)
	if n, _ := sys.Poll(t.fds, timeoutMs); n > 0 {
		t.pollResults()
	}
}

// pollEvents sets what to poll each connection for: everything it waits
// for when every is true (before sleeping), else only whether a drained
// socket has more to read.
func (t *Transport) pollEvents(every bool) {
	for i, c := range t.conns {
		ev := int16(0)
		if c.peer.Err == nil {
			if !c.eof && (every || c.rdWait) {
				ev = sys.PollIn
			}
			if c.out.Len() > 0 && every {
				ev |= sys.PollOut
			}
		}
		t.fds[i].Events = ev
		t.fds[i].Revents = 0
	}
}

// pollResults lets the connections that poll found readable read again.
func (t *Transport) pollResults() {
	for i, c := range t.conns {
		re := t.fds[i].Revents
		if re&(sys.PollIn|sys.PollErr|sys.PollHup) != 0 {
			c.rdWait = false
		}
	}
}

// progress moves whatever can move on every connection without blocking;
// it reports whether anything did. Connections whose socket was empty are
// asked with one poll(2) over all of them, which takes no socket lock,
// rather than read again. Queued frames are simply written again: a write
// waits for no poll, so the pipe refills as soon as the peer takes data.
func (t *Transport) progress() bool {
	moved := t.step()
	if moved {
		return true
	}
	t.pollEvents(false)
	if n, _ := sys.PollNow(t.fds); n == 0 {
		return false
	}
	t.pollResults()
	return t.step()
}

// step tries every connection once.
func (t *Transport) step() bool {
	moved := false
	for _, c := range t.conns {
		p := c.peer
		if p.Err != nil {
			continue
		}
		m, err := c.progress()
		moved = moved || m
		if err != nil {
			t.fail(p, err)
			moved = true
		}
	}
	return moved
}

func (c *conn) progress() (bool, error) {
	moved := false
	if c.out.Len() > 0 {
		before := c.out.Len()
		if err := c.flush(); err != nil {
			return true, err
		}
		moved = c.out.Len() != before
	}
	if c.zcQ.Len() > 0 {
		m, err := c.reap()
		if err != nil {
			return true, err
		}
		moved = moved || m
	}
	if !c.eof && !c.rdWait {
		m, err := c.read()
		if err != nil {
			return true, err
		}
		moved = moved || m
	}
	return moved, nil
}

func (c *conn) wrap(err error) error {
	if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
		err = fmt.Errorf("%w: the peer is gone (has it exited?)", err)
	}
	return fmt.Errorf("tcp: rank %d connection %d with rank %d (%s): %w", c.t.rank, c.idx, c.peer.Rank, c.peer.addr, err)
}

var errPeerClosed = errors.New("the peer closed the connection (has it exited?)")

func (c *conn) closed() error {
	c.eof = true
	err := c.wrap(errPeerClosed)
	if c.inHdr {
		return err // cut off in the middle of a frame
	}
	// The peer ends all its connections at once (Close, or exit); until
	// the last has ended, what is under way may still come on the others
	// (the stripes of a rendezvous payload).
	for _, o := range c.peer.conns {
		if !o.eof {
			return nil
		}
	}
	if c.peer.busy() {
		return err
	}
	// A quiet end (the peer closed after its last message): later
	// operations with it fail.
	c.peer.Err = err
	return nil
}

// busy reports whether anything is under way with the peer.
func (p *peer) busy() bool {
	if p.Posted.Len() > 0 || p.ctsWait.Len() > 0 || len(p.RndvRecv) > 0 {
		return true
	}
	for _, c := range p.conns {
		if c.out.Len() > 0 || c.zcQ.Len() > 0 {
			return true
		}
	}
	return false
}

// fail ends every operation with the peer with err; the first failure
// wins.
func (t *Transport) fail(p *peer, err error) {
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: %w", err, errPeerClosed)
	}
	if !t.Fail(&p.Peer, err) {
		return
	}
	for _, c := range p.conns {
		for _, q := range []*queue.FIFO[*frame]{&c.out, &c.zcQ} {
			for _, f := range q.All() {
				if f.req != nil {
					t.Finish(f.req, t.OpErr(f.req, err))
				}
			}
			q.Reset()
		}
		if c.areq != nil {
			t.Finish(c.areq, t.OpErr(c.areq, err))
		}
		if c.arr != nil && c.arr.req != nil {
			t.Finish(c.arr.req, t.OpErr(c.arr.req, err))
		}
	}
	t.FailAll(p.ctsWait.All(), err)
	p.ctsWait.Reset()
}
