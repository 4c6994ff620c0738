package sm_test

import (
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
		exact    bool // blocking receives into a buffer of the message's size
	}{
		{"blocking", "poll", false, 0, false, false},
		{"blocking progress thread", "thread", false, 0, false, false},
		{"posted receives", "poll", true, 0, false, false},
		{"FIFO of two cells", "poll", false, 2, false, false}, // sends queue behind a full FIFO while the box is free
		{"isend", "poll", false, 0, true, false},
		{"isend progress thread", "thread", false, 0, true, false},
		{"isend posted receives", "poll", true, 0, true, false},
		{"isend FIFO of two cells", "poll", false, 2, true, false},
		{"buffers of the message's size", "poll", false, 0, false, true},
		{"buffers of the message's size, FIFO of two cells", "poll", false, 2, false, true},
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
					} else if tc.exact {
						m, err = ep.Recv(peer, in[:n])
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
			defer abortAfter(20*time.Second, a, b).Stop()
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

// abortAfter aborts both endpoints once d has passed: a mixed-up order
// shows as a wait that never ends, which this turns into an error.
func abortAfter(d time.Duration, a, b *sm.Endpoint) *time.Timer {
	return time.AfterFunc(d, func() {
		err := fmt.Errorf("not done within %v: messages lost or out of order", d)
		a.Abort(err)
		b.Abort(err)
	})
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

// A box message written after a cell its receiver has not taken waits
// for that cell: rank 0's second 8-byte message goes through the ring
// (the box is not its turn), its third through the box once rank 1 has
// replied, and rank 1 receives the second and third only after both are
// out, into buffers of their size. Message k of rank 0 carries fill
// key(0, k).
func TestBoxWaitsForTheCellsBeforeIt(t *testing.T) {
	a, b := pair(t, sm.DefaultParams(), nil)
	out := make(chan struct{})
	defer abortAfter(20*time.Second, a, b).Stop()
	stamped := func(k int) []byte {
		buf := make([]byte, 8)
		payload.Fill(buf, key(0, k))
		return buf
	}
	both(t, func() error {
		defer close(out) // all out, or failed
		for k := range 2 {
			if err := a.Send(1, stamped(k)); err != nil {
				return err
			}
		}
		if _, err := a.Recv(1, make([]byte, 8)); err != nil {
			return err
		}
		return a.Send(1, stamped(2))
	}, func() error {
		in := make([]byte, 8)
		recv := func(k int) error {
			m, err := b.Recv(0, in)
			if err != nil {
				return err
			}
			return checkStamp(in[:m], 8, 0, k)
		}
		if err := recv(0); err != nil {
			return err
		}
		if err := b.Send(0, make([]byte, 8)); err != nil {
			return err
		}
		<-out
		for k := 1; k <= 2; k++ {
			if err := recv(k); err != nil {
				return err
			}
		}
		return nil
	})
	if n := a.BoxMessages(1); n != 2 {
		t.Errorf("rank 0 sent %d messages through the box, want 2 (the first and third)", n)
	}
}

// A blocking send of box size waits behind the sends queued before it:
// rank 0 queues six 1 KiB Isends on a FIFO of two cells, then sends 8
// bytes with Send, which must not take the box ahead of them.
func TestSendTakesNoBoxAheadOfQueuedSends(t *testing.T) {
	p := sm.DefaultParams()
	p.Depth, p.AutoDepth = 2, false
	a, b := pair(t, p, nil)
	const queued = 6
	sizes := [queued + 1]int{1024, 1024, 1024, 1024, 1024, 1024, 8}
	defer abortAfter(20*time.Second, a, b).Stop()
	both(t, func() error {
		var rs []transports.Request
		for k, n := range sizes[:queued] {
			buf := make([]byte, n)
			payload.Fill(buf, key(0, k))
			r, err := a.Isend(1, buf)
			if err != nil {
				return err
			}
			rs = append(rs, r)
		}
		last := make([]byte, sizes[queued])
		payload.Fill(last, key(0, queued))
		if err := a.Send(1, last); err != nil {
			return err
		}
		return a.Wait(rs...)
	}, func() error {
		for k, n := range sizes {
			in := make([]byte, n)
			m, err := b.Recv(0, in)
			if err != nil {
				return err
			}
			if err := checkStamp(in[:m], n, 0, k); err != nil {
				return err
			}
		}
		return nil
	})
}
