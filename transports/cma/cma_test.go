package cma_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cma"
	"github.com/gotune/gotune/transports/sm"
	"github.com/gotune/gotune/transports/transporttest"
)

// deniedRank: rank 1 makes itself non-dumpable; rank 0 checks CMA without
// CAP_SYS_PTRACE: the kernel must refuse rank 0's read.
func deniedRank(r *launch.Rank) (any, error) {
	env := transporttest.Env(r, nil)
	t, err := cma.New(env)
	if err != nil {
		return nil, err
	}
	if r.ID == 1 {
		if err := sys.SetDumpable(false); err != nil {
			return nil, err
		}
		return nil, cma.Check(t, env)
	}
	return nil, sys.WithoutPtraceCapability(func() error { return cma.Check(t, env) })
}

type scenario struct {
	Mode     string `json:"mode"`     // cma.mode
	Survivor string `json:"survivor"` // peer gone: "sender" or "receiver"
}

// run runs the pair of ranks of kind on s and returns each rank's text.
func (s scenario) run(t *testing.T, kind string) []string {
	return transporttest.Results[string](t, transporttest.Job{Kind: kind, Params: s, Segment: segmentBytes(t), Stall: 30 * time.Second})
}

func open(r *launch.Rank) (*sm.Endpoint, scenario, error) {
	s, err := transporttest.Params[scenario](r)
	if err != nil {
		return nil, s, err
	}
	t, err := cma.New(transporttest.Env(r, transports.Options{"cma.mode": s.Mode}))
	if err != nil {
		return nil, s, err
	}
	return t.(*sm.Endpoint), s, nil
}

func TestMain(m *testing.M) {
	transporttest.Main(m, map[string]launch.Func{
		"cma-denied":    deniedRank,
		"cma-fallback":  fallbackRank,
		"cma-peer-gone": peerGoneRank,
	})
}

// fallbackRank: rank 1 is not dumpable and rank 0 works without
// CAP_SYS_PTRACE, so the kernel refuses rank 0's copies from and into rank
// 1 (EPERM), while rank 1's copies from rank 0 succeed. Messages of
// rendezvous sizes go both ways and are checked; each rank reports why it
// fell back.
func fallbackRank(r *launch.Rank) (any, error) {
	ep, _, err := open(r)
	if err != nil {
		return nil, err
	}
	if r.ID == 1 {
		if err := sys.SetDumpable(false); err != nil {
			return nil, err
		}
	}
	if err := r.Barrier(); err != nil {
		return nil, err
	}
	sizes := []int{5000, 64 << 10, 1 << 20}
	buf, err := sys.MapAnon(1<<20, true)
	if err != nil {
		return nil, err
	}
	exchange := func() error {
		for i := range 2 * len(sizes) {
			n := sizes[i%len(sizes)]
			for _, from := range []int{0, 1} {
				if from == r.ID {
					transporttest.Pattern(buf[:n], i*2+from)
					if err := ep.Send(1-r.ID, buf[:n]); err != nil {
						return fmt.Errorf("message %d: %w", i, err)
					}
					continue
				}
				clear(buf[:n])
				got, err := ep.Recv(from, buf[:n])
				if err != nil {
					return fmt.Errorf("message %d: %w", i, err)
				}
				if got != n {
					return fmt.Errorf("message %d of %d bytes from rank %d: got %d bytes", i, n, from, got)
				}
				if err := transporttest.Verify(buf[:n], i*2+from, fmt.Sprintf("message %d from rank %d", i, from)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if r.ID == 0 {
		err = sys.WithoutPtraceCapability(exchange)
	} else {
		err = exchange()
	}
	if err != nil {
		return nil, err
	}
	why := ep.Fallbacks()[1-r.ID]
	if why == nil {
		return "", ep.Close()
	}
	return why.Error(), ep.Close()
}

// peerGoneRank: rank 1 leaves (exits cleanly) in the middle of a
// rendezvous with rank 0, which must get an error, not hang.
func peerGoneRank(r *launch.Rank) (any, error) {
	ep, s, err := open(r)
	if err != nil {
		return nil, err
	}
	buf, err := sys.MapAnon(1<<20, true)
	if err != nil {
		return nil, err
	}
	if r.ID == 1 {
		if s.Survivor == "receiver" {
			if _, err := ep.Isend(0, buf); err != nil { // request-to-send published
				return nil, err
			}
		}
		if err := r.Barrier(); err != nil {
			return nil, err
		}
		if s.Survivor == "sender" && s.Mode == "push" {
			if _, err := ep.Irecv(0, buf); err != nil { // clear-to-send published
				return nil, err
			}
		}
		return "left", nil
	}
	var gone func() error
	if s.Survivor == "receiver" || s.Mode == "push" {
		// The copy must meet a process that is gone, not one on its way out.
		gone = func() error { return sys.WaitProcessExit(r.PIDs[1], 20*time.Second) }
	}
	return transporttest.Survive(r, ep, s.Survivor == "sender", buf, gone)
}

// A single copy the kernel refuses (EPERM, real ptrace rules) falls back to
// copy-in/copy-out: every message arrives intact, in both modes, and both
// ranks record why.
func TestRefusedCopyFallsBack(t *testing.T) {
	for _, mode := range []string{"pull", "push", "split"} { // split pulls whole first
		t.Run(mode, func(t *testing.T) {
			res := scenario{Mode: mode}.run(t, "cma-fallback")
			call := map[string]string{"pull": "process_vm_readv", "push": "process_vm_writev", "split": "process_vm_readv"}[mode]
			for rank, want := range []string{call, "operation not permitted"} {
				why := res[rank]
				if !strings.Contains(why, want) || !strings.Contains(why, fmt.Sprintf("rank %d", 1-rank)) {
					t.Errorf("rank %d: fallback reason %q does not name rank %d and %q", rank, why, 1-rank, want)
				}
				t.Logf("rank %d: %s", rank, why)
			}
		})
	}
}

// A peer that exits in the middle of a rendezvous leaves the survivor
// with a clear error (which operation, which rank, what happened), in each
// role and mode, instead of a hang.
func TestPeerGoneMidRendezvous(t *testing.T) {
	for _, s := range []scenario{{"pull", "sender"}, {"pull", "receiver"}, {"push", "sender"}, {"push", "receiver"}} {
		t.Run(s.Mode+"_"+s.Survivor, func(t *testing.T) {
			msg := s.run(t, "cma-peer-gone")[0]
			op := map[string]string{"sender": "rendezvous send", "receiver": "rendezvous receive"}[s.Survivor]
			if !strings.Contains(msg, op) || !strings.Contains(msg, "rank 1") ||
				!(strings.Contains(msg, "has exited") || strings.Contains(msg, "no such process")) {
				t.Errorf("survivor's error %q does not say %q, rank 1, and that the peer is gone", msg, op)
			}
			t.Log(msg)
		})
	}
}

func segmentBytes(t *testing.T) int { return transporttest.SharedBytes(t, "cma", 2, nil) }

func TestPermissionDeniedIsNotSupported(t *testing.T) {
	_, err := transporttest.Start(t, transporttest.Job{Kind: "cma-denied", Segment: segmentBytes(t)})
	if !errors.Is(err, transports.ErrNotSupported) {
		t.Fatalf("got %v, want an error matching ErrNotSupported", err)
	}
	if !strings.Contains(err.Error(), "process_vm_readv") || !strings.Contains(err.Error(), "ptrace") {
		t.Errorf("error does not say what and why: %v", err)
	}
}
