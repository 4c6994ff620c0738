package sm_test

import (
	"errors"
	"os"
	"testing"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// group builds n endpoints of one process over an anonymous mapping.
func group(t testing.TB, n int, p sm.Params) []*sm.Endpoint {
	t.Helper()
	seg, err := sys.MapAnon(p.SegmentBytes(n), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Unmap(seg) })
	pids := make([]int, n)
	for r := range pids {
		pids[r] = os.Getpid()
	}
	eps := make([]*sm.Endpoint, n)
	for r := range eps {
		env := transports.Env{Rank: r, Size: n, PIDs: pids, Segment: seg}
		if eps[r], err = sm.New(env, p, nil, "sm"); err != nil {
			t.Fatal(err)
		}
		ep := eps[r]
		t.Cleanup(func() { ep.Abort(errors.New("test over")); ep.Close() })
	}
	return eps
}

// A blocking receive from a peer keeps moving what this rank still owes
// that peer or others while it polls the peer's ring: each case deadlocks
// if the receive only polls.
func TestBlockingReceiveKeepsProgressing(t *testing.T) {
	t.Run("pipelined send to the same peer", func(t *testing.T) {
		// Rank 0's send is still in its first fragment when it waits
		// for the reply; rank 1 replies once the send has landed.
		eps := group(t, 2, small(1, 1))
		big, small8 := buffer(t, 1000), buffer(t, 8)
		both(t, func() error {
			q, err := eps[0].Isend(1, big)
			if err != nil {
				return err
			}
			if _, err := eps[0].Recv(1, small8); err != nil {
				return err
			}
			return eps[0].Wait(q)
		}, func() error {
			if _, err := eps[1].Recv(0, buffer(t, 1000)); err != nil {
				return err
			}
			return eps[1].Send(0, buffer(t, 8))
		})
	})
	t.Run("another peer's full ring", func(t *testing.T) {
		// Rank 2 fills its one-cell ring to rank 0 and tells rank 1 only
		// after its second message to rank 0 is out; rank 1 replies to
		// rank 0 then. Rank 0, receiving from 1, must drain rank 2.
		eps := group(t, 3, small(1, 1))
		done := make(chan error, 1)
		go func() {
			m := buffer(t, 8)
			for range 2 {
				if err := eps[2].Send(0, m); err != nil {
					done <- err
					return
				}
			}
			done <- eps[2].Send(1, m)
		}()
		both(t, func() error {
			m := buffer(t, 8)
			if _, err := eps[0].Recv(1, m); err != nil {
				return err
			}
			for range 2 {
				if _, err := eps[0].Recv(2, m); err != nil {
					return err
				}
			}
			return nil
		}, func() error {
			m := buffer(t, 8)
			if _, err := eps[1].Recv(2, m); err != nil {
				return err
			}
			return eps[1].Send(0, m)
		})
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
