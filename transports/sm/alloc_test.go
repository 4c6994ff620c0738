package sm_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// TestMessagePathsAllocateNothing: once warm, a message costs no heap
// allocation on any entry point (Send, Recv, Isend, Irecv, Wait), eager,
// pipelined or parked early. Why: ranks run with the collector off, and an
// allocation per message is also time on the small-message path.
func TestMessagePathsAllocateNothing(t *testing.T) {
	ops := []struct {
		name string
		run  func(a, c *sm.Endpoint, sa, sc []byte) error
	}{
		{"send-recv", func(a, c *sm.Endpoint, sa, sc []byte) error {
			if err := a.Send(1, sa); err != nil {
				return err
			}
			_, err := c.Recv(0, sc)
			return err
		}},
		{"irecv-isend-wait", nonBlocking(false)},
		{"isend-irecv-wait", nonBlocking(true)},
		{"early", func(a, c *sm.Endpoint, sa, sc []byte) error {
			if err := a.Send(1, sa); err != nil {
				return err
			}
			// The clock jumps past sm.park at every reading: the first
			// idle pass starts the wait, the second parks the message.
			c.Progress()
			c.Progress()
			_, err := c.Recv(0, sc)
			return err
		}},
	}
	for _, mode := range []string{"poll", "thread"} {
		for _, n := range []int{8, 64, 1024, 64 << 10} {
			for _, op := range ops {
				t.Run(fmt.Sprintf("progress=%s/%s/size=%d", mode, op.name, n), func(t *testing.T) {
					p := sm.DefaultParams()
					p.Progress = mode
					a, c := pair(t, p, nil)
					now := time.Unix(1, 0)
					c.SetClock(func() time.Time { now = now.Add(time.Hour); return now })
					sa, sc := buffer(t, n), buffer(t, n)
					var err error
					allocs := testing.AllocsPerRun(100, func() {
						if e := op.run(a, c, sa, sc); e != nil && err == nil {
							err = e
						}
					})
					if err != nil {
						t.Fatal(err)
					}
					if allocs != 0 {
						t.Errorf("%v allocations per message, want 0", allocs)
					}
				})
			}
		}
	}
}

// nonBlocking is one message by Isend, Irecv and Wait, the send posted
// first or the receive.
func nonBlocking(sendFirst bool) func(a, c *sm.Endpoint, sa, sc []byte) error {
	return func(a, c *sm.Endpoint, sa, sc []byte) error {
		var sq, rq transports.Request
		var err error
		for _, send := range []bool{sendFirst, !sendFirst} {
			if send {
				sq, err = a.Isend(1, sa)
			} else {
				rq, err = c.Irecv(0, sc)
			}
			if err != nil {
				return err
			}
		}
		if err := a.Wait(sq); err != nil {
			return err
		}
		return c.Wait(rq)
	}
}
