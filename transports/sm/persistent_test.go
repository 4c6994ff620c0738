package sm_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cma"
	"github.com/gotune/gotune/transports/sm"
)

func credits(t *testing.T, ep *sm.Endpoint, peer int) int {
	t.Helper()
	free, total, err := ep.PersistentCredits(peer)
	if err != nil {
		t.Fatal(err)
	}
	if total != ep.Params().Depth {
		t.Fatalf("%d credits in all, want the depth %d", total, ep.Params().Depth)
	}
	return free
}

// Persistent sends and receives set up once, started and waited for many
// times (with ordinary traffic in between), deliver every message intact;
// a live persistent send holds one credit, and freeing returns it.
func TestPersistentCycles(t *testing.T) {
	type tc struct {
		name   string
		p      sm.Params
		single sm.SingleCopy
		size   int
	}
	var cases []tc
	for _, p := range []sm.Params{small(1, 1), small(2, 1), small(3, 2)} {
		for _, n := range []int{0, 8, 64, 65, 300} {
			cases = append(cases, tc{fmt.Sprintf("depth%d_frags%d_%dB", p.Depth, p.FragSlots, n), p, nil, n})
		}
	}
	cases = append(cases,
		tc{"cma_pull_300B", small(1, 1), cma.NewCopier(cma.Params{Pull: true, Threshold: 65}), 300},
		tc{"cma_push_300B", small(1, 1), cma.NewCopier(cma.Params{Pull: false, Threshold: 65}), 300},
		tc{"cma_split_96K", small(1, 1), cma.NewCopier(cma.Params{Pull: true, Split: true, Threshold: 65}), 96 << 10})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := pair(t, c.p, c.single)
			const cycles = 30
			ps, pr, ob, rob := buffer(t, c.size), buffer(t, c.size), buffer(t, 100), buffer(t, 100)
			both(t, func() error {
				send, err := a.SendInit(1, ps)
				if err != nil {
					return err
				}
				if free := credits(t, a, 1); free != c.p.Depth-1 {
					return fmt.Errorf("%d credits free with one persistent send live, want %d", free, c.p.Depth-1)
				}
				for i := range cycles {
					fill(ps, i)
					if err := send.Start(); err != nil {
						return fmt.Errorf("cycle %d: %w", i, err)
					}
					fill(ob, -i)
					if err := a.Send(1, ob[:i%100]); err != nil { // ordinary traffic behind it
						return err
					}
					if err := a.Wait(send); err != nil {
						return fmt.Errorf("cycle %d: %w", i, err)
					}
					if send.Len() != c.size {
						return fmt.Errorf("cycle %d: sent %d bytes, want %d", i, send.Len(), c.size)
					}
				}
				return send.Free()
			}, func() error {
				recv, err := b.RecvInit(0, pr)
				if err != nil {
					return err
				}
				want := make([]byte, max(c.size, 100))
				for i := range cycles {
					if err := recv.Start(); err != nil {
						return fmt.Errorf("cycle %d: %w", i, err)
					}
					if err := b.Wait(recv); err != nil {
						return fmt.Errorf("cycle %d: %w", i, err)
					}
					fill(want[:c.size], i)
					if recv.Len() != c.size || !bytes.Equal(pr, want[:c.size]) {
						return fmt.Errorf("cycle %d: persistent receive got %d bytes, want %d, or content differs", i, recv.Len(), c.size)
					}
					n, err := b.Recv(0, rob)
					fill(want[:i%100], -i)
					if err != nil || n != i%100 || !bytes.Equal(rob[:n], want[:n]) {
						return fmt.Errorf("cycle %d: ordinary message: %d bytes, %v, or content differs", i, n, err)
					}
				}
				return recv.Free()
			})
			if free := credits(t, a, 1); free != c.p.Depth {
				t.Errorf("%d of %d credits free after every persistent send was freed", free, c.p.Depth)
			}
			closeAll(t, a, b)
		})
	}
}

// More live persistent sends than credits, all in flight at once: starts
// beyond the credits wait (in order) for completions and take back the
// credits of completed ones; nothing hangs, order holds, and freeing them
// all returns every credit.
func TestPersistentSendsOutnumberCredits(t *testing.T) {
	a, b := pair(t, small(1, 1), nil)
	const live, n, rounds = 4, 100, 10
	sb, rb := buffer(t, live*n), buffer(t, live*n)
	both(t, func() error {
		var sends []transports.PersistentRequest
		for k := range live {
			s, err := a.SendInit(1, sb[k*n:(k+1)*n])
			if err != nil {
				return err
			}
			sends = append(sends, s)
		}
		if free := credits(t, a, 1); free != 0 {
			return fmt.Errorf("%d credits free, want 0: the first send reserves the only one", free)
		}
		for round := range rounds {
			var reqs []transports.Request
			for k := range live {
				s := sends[(k+round)%live] // a different start order every round
				fill(sb[(k+round)%live*n:][:n], round*live+k)
				if err := s.Start(); err != nil {
					return err
				}
				reqs = append(reqs, s)
			}
			if err := a.Wait(reqs...); err != nil {
				return err
			}
		}
		for _, s := range sends {
			if err := s.Free(); err != nil {
				return err
			}
		}
		return nil
	}, func() error {
		want := make([]byte, n)
		for round := range rounds {
			for k := range live {
				if _, err := b.Recv(0, rb[:n]); err != nil {
					return err
				}
				fill(want, round*live+k)
				if !bytes.Equal(rb[:n], want) {
					return fmt.Errorf("round %d message %d out of order or corrupted", round, k)
				}
			}
		}
		return nil
	})
	if free := credits(t, a, 1); free != 1 {
		t.Errorf("%d credits free after freeing every persistent send, want 1", free)
	}
}

// sm.persist=leak: every freed persistent send loses its credit; once all
// are gone, a persistent start never leaves the sender, however much both
// sides progress. The same cycles with the safe setting keep every credit.
func TestPersistentLeakLosesCredits(t *testing.T) {
	for _, leak := range []bool{false, true} {
		t.Run(fmt.Sprintf("leak=%v", leak), func(t *testing.T) {
			p := small(2, 1)
			p.LeakPersistent = leak
			a, b := pair(t, p, nil)
			sb, rb := buffer(t, 8), buffer(t, 8)
			for i := range 3 {
				s, err := a.SendInit(1, sb)
				if err != nil {
					t.Fatal(err)
				}
				r := irecv(t, b, rb)
				if i < p.Depth || !leak {
					if err := s.Start(); err != nil {
						t.Fatal(err)
					}
					both(t, func() error { return a.Wait(s) }, func() error { return b.Wait(r) })
					if err := s.Free(); err != nil {
						t.Fatal(err)
					}
					want := p.Depth
					if leak {
						want = p.Depth - 1 - i
					}
					if free := credits(t, a, 1); free != want {
						t.Fatalf("cycle %d: %d credits free, want %d", i, free, want)
					}
					continue
				}
				// Every credit leaked: the start stays queued.
				if err := s.Start(); err != nil {
					t.Fatal(err)
				}
				for range 1000 {
					a.Progress()
					b.Progress()
				}
				if s.Done() || r.Done() {
					t.Fatalf("a persistent send went out with every credit leaked (send done %v, receive done %v)", s.Done(), r.Done())
				}
			}
		})
	}
}

// Misuse is an error, not a hang or a corruption.
func TestPersistentMisuse(t *testing.T) {
	a, _ := pair(t, small(2, 1), nil)
	buf := buffer(t, 8)
	s, err := a.SendInit(1, buf)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(s); err != nil { // inactive: returns at once
		t.Fatalf("wait on an inactive request: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"start while active", s.Start(), "active"},
		{"free while active", s.Free(), "active"},
		{"close with it live", a.Close(), "not freed"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, c.err, c.want)
		}
	}
	if _, err := a.SendInit(5, buf); err == nil {
		t.Error("persistent send to a rank that does not exist")
	}
}
