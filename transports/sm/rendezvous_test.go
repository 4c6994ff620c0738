package sm_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// brokenCopy is a single-copy mechanism whose every copy fails with err,
// counting the attempts.
type brokenCopy struct {
	pull  bool
	err   error
	tries atomic.Int32
}

func (f *brokenCopy) Name() string          { return "broken" }
func (f *brokenCopy) Pull() bool            { return f.pull }
func (f *brokenCopy) Rendezvous(n int) bool { return n >= 65 }
func (f *brokenCopy) Copy(_ int, _ []byte, _ sm.Place, _ uintptr, pull bool) error {
	f.tries.Add(1)
	return f.err
}

func refused(pull bool) error {
	op := "process_vm_writev"
	if pull {
		op = "process_vm_readv"
	}
	return sys.NotSupported(op, "planted refusal", syscall.EPERM)
}

// postAll makes n requests with post, then waits on ep for them all,
// leaving Wait's error in *waited; it returns a post's error.
func postAll(ep *sm.Endpoint, n int, waited *error, post func(i int) (transports.Request, error)) error {
	reqs := make([]transports.Request, 0, n)
	for i := range n {
		r, err := post(i)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	*waited = ep.Wait(reqs...)
	return nil
}

// window sends messages of sizes from a (rank from) to b (rank to) as a
// window of non-blocking operations and, when both sides succeed, checks
// every byte. Receive buffers hold capacity bytes (at most 2000).
func window(t *testing.T, a, b *sm.Endpoint, from, to int, sizes []int, capacity int, seed int) (send, recv error) {
	t.Helper()
	sb, rb := buffer(t, len(sizes)*2000), buffer(t, len(sizes)*2000)
	for i, n := range sizes {
		fill(sb[i*2000:i*2000+n], seed+i)
	}
	both(t, func() error {
		return postAll(a, len(sizes), &send, func(i int) (transports.Request, error) {
			return a.Isend(to, sb[i*2000:i*2000+sizes[i]])
		})
	}, func() error {
		return postAll(b, len(sizes), &recv, func(i int) (transports.Request, error) {
			return b.Irecv(from, rb[i*2000:i*2000+capacity])
		})
	})
	if send == nil && recv == nil {
		for i, n := range sizes {
			if !bytes.Equal(rb[i*2000:i*2000+n], sb[i*2000:i*2000+n]) {
				t.Errorf("message %d of %d bytes from rank %d differs", i, n, from)
			}
		}
	}
	return send, recv
}

// A refused single copy (ErrNotSupported) is not an error: the message
// goes through the fragments, intact, both endpoints record why, and
// neither tries single copy again, in both directions. Messages already
// announced (a window of requests-to-send) follow the same way.
func TestRefusedSingleCopyFallsBack(t *testing.T) {
	for _, pull := range []bool{true, false} {
		t.Run(fmt.Sprintf("pull=%v", pull), func(t *testing.T) {
			mech := &brokenCopy{pull: pull, err: refused(pull)}
			a, b := pair(t, small(2, 2), mech)
			sizes := []int{100, 1000, 8, 65, 2000, 64}
			for round := range 3 {
				if s, r := window(t, a, b, 0, 1, sizes, 2000, round); s != nil || r != nil {
					t.Fatalf("round %d, 0->1: send %v, receive %v", round, s, r)
				}
				if s, r := window(t, b, a, 1, 0, sizes, 2000, round+100); s != nil || r != nil {
					t.Fatalf("round %d, 1->0: send %v, receive %v", round, s, r)
				}
			}
			if n := mech.tries.Load(); n != 1 {
				t.Errorf("%d single-copy attempts, want 1 (then none with that peer)", n)
			}
			want := "process_vm_writev"
			if pull {
				want = "process_vm_readv"
			}
			for i, ep := range []*sm.Endpoint{a, b} {
				why := ep.Fallbacks()[1-i]
				if why == nil {
					t.Errorf("rank %d records no fallback for rank %d", i, 1-i)
					continue
				}
				// The failing side has the whole error, its peer the errno.
				if !strings.Contains(why.Error(), want) && !strings.Contains(why.Error(), syscall.EPERM.Error()) {
					t.Errorf("rank %d: fallback reason %q says neither %s nor EPERM", i, why, want)
				}
			}
			closeAll(t, a, b)
		})
	}
}

// A refused copy of a message longer than the receive buffer truncates
// like every other path: prefix delivered, ErrTruncated, sender fine.
func TestFallbackTruncates(t *testing.T) {
	for _, pull := range []bool{true, false} {
		a, b := pair(t, small(2, 2), &brokenCopy{pull: pull, err: refused(pull)})
		s, r := window(t, a, b, 0, 1, []int{500}, 300, 7)
		if s != nil || !errors.Is(r, transports.ErrTruncated) {
			t.Errorf("pull=%v: send %v, receive %v (want ErrTruncated)", pull, s, r)
		}
	}
}

// Any other copy failure (here: the peer process is gone) fails the
// message on both sides, each error naming the peer, the operation and
// the cause; nothing hangs and nothing falls back.
func TestFailedSingleCopyFailsBothSides(t *testing.T) {
	for _, pull := range []bool{true, false} {
		t.Run(fmt.Sprintf("pull=%v", pull), func(t *testing.T) {
			mech := &brokenCopy{pull: pull, err: fmt.Errorf("process_vm_readv pid 4242: %w", syscall.ESRCH)}
			a, b := pair(t, small(2, 2), mech)
			s, r := window(t, a, b, 0, 1, []int{1000}, 2000, 1)
			for _, c := range []struct {
				side string
				err  error
				peer string
			}{{"sender", s, "rank 1"}, {"receiver", r, "rank 0"}} {
				switch {
				case c.err == nil:
					t.Errorf("%s saw no error", c.side)
				case !errors.Is(c.err, syscall.ESRCH):
					t.Errorf("%s: %v does not carry ESRCH", c.side, c.err)
				case !strings.Contains(c.err.Error(), c.peer) || !strings.Contains(c.err.Error(), "rendezvous"):
					t.Errorf("%s: %q names neither %s nor the rendezvous", c.side, c.err, c.peer)
				}
			}
			if len(a.Fallbacks())+len(b.Fallbacks()) != 0 {
				t.Errorf("fell back on a failure that is not a refusal: %v %v", a.Fallbacks(), b.Fallbacks())
			}
		})
	}
}
