package cma_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cma"
	"github.com/gotune/gotune/transports/sm"
)

func TestMain(m *testing.M) {
	// Rank 1 makes itself non-dumpable; rank 0 checks CMA without
	// CAP_SYS_PTRACE: the kernel must refuse rank 0's read.
	launch.Register("cma-denied", func(r *launch.Rank) (any, error) {
		env := transports.Env{Rank: r.ID, Size: r.Size, PIDs: r.PIDs, Segment: r.Segment}
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
	})
	launch.Register("cma-fallback", fallbackRank)
	launch.Register("cma-peer-gone", peerGoneRank)
	launch.MaybeRunRank()
	os.Exit(m.Run())
}

type scenario struct {
	Mode     string `json:"mode"`     // cma.mode
	Survivor string `json:"survivor"` // peer gone: "sender" or "receiver"
}

func (s scenario) job(t *testing.T, kind string) launch.Job {
	params, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return launch.Job{Kind: kind, Size: 2, SegmentBytes: segmentBytes(t), Params: params, Stall: 30 * time.Second}
}

func open(r *launch.Rank) (*sm.Endpoint, scenario, error) {
	var s scenario
	if err := r.Params(&s); err != nil {
		return nil, s, err
	}
	env := transports.Env{Rank: r.ID, Size: r.Size, PIDs: r.PIDs, Segment: r.Segment, Options: transports.Options{"cma.mode": s.Mode}}
	t, err := cma.New(env)
	if err != nil {
		return nil, s, err
	}
	return t.(*sm.Endpoint), s, nil
}

func pattern(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed*31 + i*7 + i>>9)
	}
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
	want := make([]byte, 1<<20)
	exchange := func() error {
		for i := range 2 * len(sizes) {
			n := sizes[i%len(sizes)]
			for _, from := range []int{0, 1} {
				if from == r.ID {
					pattern(buf[:n], i*2+from)
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
				pattern(want[:n], i*2+from)
				if got != n || !bytes.Equal(buf[:n], want[:n]) {
					return fmt.Errorf("message %d of %d bytes from rank %d: got %d bytes, content equal %v", i, n, from, got, bytes.Equal(buf[:n], want[:n]))
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
	var req transports.Request
	if s.Survivor == "sender" {
		if req, err = ep.Isend(1, buf); err != nil {
			return nil, err
		}
	}
	if err := r.Barrier(); err != nil {
		return nil, err
	}
	if s.Survivor == "receiver" || s.Mode == "push" {
		// The copy must meet a process that is gone, not one on its way out.
		if err := sys.WaitProcessExit(r.PIDs[1], 20*time.Second); err != nil {
			return nil, err
		}
	}
	if s.Survivor == "sender" {
		err = ep.Wait(req)
	} else {
		_, err = ep.Recv(1, buf)
	}
	if err == nil {
		return nil, errors.New("survivor saw no error")
	}
	return err.Error(), nil
}

// A single copy the kernel refuses (EPERM, real ptrace rules) falls back to
// copy-in/copy-out: every message arrives intact, in both modes, and both
// ranks record why.
func TestRefusedCopyFallsBack(t *testing.T) {
	for _, mode := range []string{"pull", "push"} {
		t.Run(mode, func(t *testing.T) {
			res, err := launch.Run(context.Background(), scenario{Mode: mode}.job(t, "cma-fallback"), launch.Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			call := map[string]string{"pull": "process_vm_readv", "push": "process_vm_writev"}[mode]
			for rank, want := range []string{call, "operation not permitted"} {
				var why string
				if err := json.Unmarshal(res[rank], &why); err != nil {
					t.Fatal(err)
				}
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
			res, err := launch.Run(context.Background(), s.job(t, "cma-peer-gone"), launch.Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			var msg string
			if err := json.Unmarshal(res[0], &msg); err != nil {
				t.Fatal(err)
			}
			op := map[string]string{"sender": "rendezvous send", "receiver": "rendezvous receive"}[s.Survivor]
			if !strings.Contains(msg, op) || !strings.Contains(msg, "rank 1") ||
				!(strings.Contains(msg, "has exited") || strings.Contains(msg, "no such process")) {
				t.Errorf("survivor's error %q does not say %q, rank 1, and that the peer is gone", msg, op)
			}
			t.Log(msg)
		})
	}
}

func segmentBytes(t *testing.T) int {
	d, err := transports.Lookup("cma")
	if err != nil {
		t.Fatal(err)
	}
	n, err := d.SharedBytes(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPermissionDeniedIsNotSupported(t *testing.T) {
	_, err := launch.Run(context.Background(), launch.Job{Kind: "cma-denied", Size: 2, SegmentBytes: segmentBytes(t)}, launch.Hooks{})
	if !errors.Is(err, transports.ErrNotSupported) {
		t.Fatalf("got %v, want an error matching ErrNotSupported", err)
	}
	if !strings.Contains(err.Error(), "process_vm_readv") || !strings.Contains(err.Error(), "ptrace") {
		t.Errorf("error does not say what and why: %v", err)
	}
}

func TestParseParams(t *testing.T) {
	cases := []struct {
		opts transports.Options
		want string
	}{
		{nil, ""},
		{transports.Options{"cma.mode": "push", "cma.chunk": "64K", "cma.threshold": "16K"}, ""},
		{transports.Options{"cma.mode": "pull-ish"}, `cma.mode="pull-ish"`},
		{transports.Options{"cma.threshold": "4096"}, "cma.threshold=4096"},
		{transports.Options{"cma.chunk": "lots"}, `cma.chunk="lots"`},
		{transports.Options{"cma.onerror": "ignore"}, ""},
		{transports.Options{"cma.onerror": "retry"}, `cma.onerror="retry"`},
	}
	for _, c := range cases {
		p, err := cma.ParseParams(c.opts, 4096)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.opts, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: got %v, want error containing %q", c.opts, err, c.want)
		case c.want == "" && c.opts == nil && (!p.Pull || p.Threshold != 4097 || p.Chunk != 0 || p.IgnoreErrors):
			t.Errorf("defaults: %+v", p)
		}
	}
}
