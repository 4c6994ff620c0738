package sm_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/payload"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// Messages through the fast box, packed cells and the ring keep their
// order: both ranks run one seeded schedule of exchanges (both send, then
// both receive), ping-pongs and one-way bursts of sizes on each side of the
// box's, the pack's and the eager limit, so that box messages fall between
// ring messages both ways, arriving before and after their receives; with
// isend every send is an Isend waited for at the end of its step, so small
// ones are packed and published by the rank's next call. Every message
// carries a fill that depends on its number (internal/payload).
func TestFastBoxKeepsOrderWithTheRing(t *testing.T) {
	sizes := []int{0, 1, 8, 56, 57, sm.BoxPayload, sm.BoxPayload + 1, 200, 256, 257, 4096, 9000, 70000}
	for _, tc := range []struct {
		name     string
		progress string
		posted   bool // receives posted with Irecv before the peer's sends of a step
		depth    int  // the FIFO's cells (0: the built-in)
		isend    bool // sends are Isends, waited for at the end of the step
	}{
		{"blocking", "poll", false, 0, false},
		{"blocking progress thread", "thread", false, 0, false},
		{"posted receives", "poll", true, 0, false},
		{"FIFO of two cells", "poll", false, 2, false}, // sends queue behind a full FIFO while the box is free
		{"isend", "poll", false, 0, true},
		{"isend progress thread", "thread", false, 0, true},
		{"isend posted receives", "poll", true, 0, true},
		{"isend FIFO of two cells", "poll", false, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := sm.DefaultParams()
			p.Progress = tc.progress
			if tc.depth > 0 {
				p.Depth, p.AutoDepth = tc.depth, false
			}
			a, b := pair(t, p, nil)
			const steps = 600
			run := func(ep *sm.Endpoint, rank int) error {
				peer := 1 - rank
				rng := rand.New(rand.NewPCG(7, 11)) // the same schedule on both ranks
				sent, got := 0, 0
				out := make([]byte, 70000)
				in := make([]byte, 70000)
				var pending []transports.Request
				send := func(n int) error {
					if !tc.isend {
						payload.Fill(out[:n], key(rank, sent))
						sent++
						return ep.Send(peer, out[:n])
					}
					b := make([]byte, n) // in use until the step's end
					payload.Fill(b, key(rank, sent))
					sent++
					r, err := ep.Isend(peer, b)
					pending = append(pending, r)
					return err
				}
				recv := func(n int) error {
					var m int
					var err error
					if tc.posted {
						var r transports.Request
						if r, err = ep.Irecv(peer, in); err == nil {
							err = ep.Wait(r)
							m = r.Len()
						}
					} else {
						m, err = ep.Recv(peer, in)
					}
					if err != nil {
						return err
					}
					if err := checkStamp(in[:m], n, peer, got); err != nil {
						return fmt.Errorf("rank %d: %w", rank, err)
					}
					got++
					return nil
				}
				for range steps {
					if err := ep.Wait(pending...); err != nil {
						return err
					}
					pending = pending[:0]
					n := sizes[rng.IntN(len(sizes))]
					switch rng.IntN(3) {
					case 0: // exchange
						if err := send(n); err != nil {
							return err
						}
						if err := recv(n); err != nil {
							return err
						}
					case 1: // ping-pong, rank 0 first
						for _, first := range []bool{rank == 0, rank == 1} {
							var err error
							if first {
								err = send(n)
							} else {
								err = recv(n)
							}
							if err != nil {
								return err
							}
						}
					case 2: // a burst from rank 0
						k := 1 + rng.IntN(8)
						for i := range k {
							m := sizes[(i*3+n)%len(sizes)]
							var err error
							if rank == 0 {
								err = send(m)
							} else {
								err = recv(m)
							}
							if err != nil {
								return err
							}
						}
					}
				}
				return ep.Wait(pending...)
			}
			// A mixed-up order shows as a wait that never ends: a deadline
			// turns it into an error.
			stop := time.AfterFunc(20*time.Second, func() {
				err := errors.New("schedule not done within 20 s: messages lost or out of order")
				a.Abort(err)
				b.Abort(err)
			})
			defer stop.Stop()
			both(t, func() error { return run(a, 0) }, func() error { return run(b, 1) })
			if tc.isend {
				if a.PackedMessages(1) == 0 || b.PackedMessages(0) == 0 {
					t.Errorf("nothing packed: rank 0 packed %d messages, rank 1 %d", a.PackedMessages(1), b.PackedMessages(0))
				}
			} else if a.BoxMessages(1) == 0 || b.BoxMessages(0) == 0 {
				t.Errorf("fast box unused: rank 0 sent %d, rank 1 %d messages through it", a.BoxMessages(1), b.BoxMessages(0))
			}
		})
	}
}

// key is message number i from rank's payload key (internal/payload).
func key(rank, i int) uint64 { return uint64(i)<<1 | uint64(rank) }

// checkStamp checks that b is message number i from rank, of size n.
func checkStamp(b []byte, n, rank, i int) error {
	if len(b) != n {
		return fmt.Errorf("message %d from rank %d: %d bytes, want %d", i, rank, len(b), n)
	}
	if k := payload.Check(b, key(rank, i)); k >= 0 {
		return fmt.Errorf("message %d from rank %d (%d bytes): wrong bytes from offset %d", i, rank, n, k)
	}
	return nil
}
