package launch

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/sys"
)

func startCluster(t *testing.T, hosts ...string) *Cluster {
	t.Helper()
	c, wait, err := InProcess(t.TempDir(), hosts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := wait(); err != nil {
			t.Errorf("node agent: %v", err)
		}
	})
	return c
}

func TestClusterPlacesRanksOnNodes(t *testing.T) {
	c := startCluster(t, "node-b", "node-b")
	here, _ := os.Hostname()
	if got := c.Nodes(); !slices.Equal(got, []string{here, "node-b"}) {
		t.Fatalf("nodes %v, want node-a and node-b (launcher ranks 1 and 2 share node-b)", got)
	}
	res, err := Run(context.Background(), Job{Kind: "whereami", Size: 3, Nodes: 2}, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	wantHosts := []string{here, here, "node-b"}
	var pids []int
	for r, raw := range res {
		var got struct {
			Hosts []string
			Addr  string
			PID   int
			PIDs  []int
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Hosts, wantHosts) {
			t.Errorf("rank %d: hosts %v, want %v", r, got.Hosts, wantHosts)
		}
		if net.ParseIP(got.Addr) == nil {
			t.Errorf("rank %d: address %q", r, got.Addr)
		}
		if got.PIDs[r] != got.PID {
			t.Errorf("rank %d: pid %d in the spec, %d itself", r, got.PIDs[r], got.PID)
		}
		pids = append(pids, got.PID)
	}
	assertGone(t, pids)

	// The collectives span nodes.
	if _, err := Run(context.Background(), Job{Kind: "allgather", Size: 3, Nodes: 2}, Hooks{}); err != nil {
		t.Fatal(err)
	}
	// One node keeps the job where it was: the rank's hosts stay unset.
	res, err = Run(context.Background(), Job{Kind: "whereami", Size: 2}, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res[1]), `"hosts":null`) {
		t.Errorf("a one-node job's rank says %s", res[1])
	}
	// More nodes than the cluster has is not supported here, and says so.
	_, err = Run(context.Background(), Job{Kind: "whereami", Size: 3, Nodes: 3}, Hooks{})
	if !errors.Is(err, sys.ErrNotSupported) {
		t.Errorf("3 nodes of 2: %v, want ErrNotSupported", err)
	}
}

func TestClusterRemoteFailureEndsJob(t *testing.T) {
	startCluster(t, "node-b")
	_, err := Run(context.Background(), Job{Kind: "fail-rank1", Size: 2, Nodes: 2}, Hooks{})
	if err == nil || !strings.Contains(err.Error(), "planted failure") {
		t.Fatalf("got %v, want rank 1's planted failure", err)
	}
	_, err = Run(context.Background(), Job{Kind: "vanish-rank1", Size: 2, Nodes: 2}, Hooks{})
	if err == nil || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("got %v, want rank 1 gone", err)
	}
}

func TestClusterStallTakesRemoteStacks(t *testing.T) {
	// rank 0 beats: the remote rank 1 stalls alone
	wantStall(t, "block-rank1", []int{1})
}

// In a deadlock every rank stops; the remote one's beats arrive through
// its agent, later than the local one's, and its stacks are taken too.
func TestClusterDeadlockTakesEveryRanksStacks(t *testing.T) {
	wantStall(t, "block", []int{0, 1})
}

// wantStall runs kind's two ranks on two nodes under a short stall
// deadline and wants ranks to stall, each with its stacks, which for the
// remote rank come through its node agent.
func wantStall(t *testing.T, kind string, ranks []int) {
	startCluster(t, "node-b")
	_, err := Run(context.Background(), Job{Kind: kind, Size: 2, Nodes: 2, Stall: 300 * time.Millisecond}, Hooks{})
	var st *StallError
	if !errors.As(err, &st) {
		t.Fatalf("got %v, want a stall", err)
	}
	if !slices.Equal(st.Ranks, ranks) {
		t.Fatalf("stalled ranks %v, want %v", st.Ranks, ranks)
	}
	for _, r := range ranks {
		if s := st.Stacks[r]; !strings.Contains(s, stacksEnd(strconv.Itoa(r))) || !strings.Contains(s, "goroutine") {
			t.Errorf("rank %d's stacks missing: %q", r, s)
		}
	}
}

func TestClusterRefusesWrongToken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const token = "right"
	// A stranger with the wrong token first, then the real agent.
	go func() {
		c, err := dialCoordinator(context.Background(), addr)
		if err != nil {
			return
		}
		defer c.Close()
		json.NewEncoder(c).Encode(ctl{Op: "join", Token: "wrong", LRank: 1, Host: "intruder"})
		c.Read(make([]byte, 1)) // closed by the coordinator
		go Serve(context.Background(), ClusterConfig{LRank: 1, LSize: 2, Host: "node-b", Addr: addr, Token: token})
	}()
	c, err := Coordinate(context.Background(), ClusterConfig{LSize: 2, Host: "node-a", Addr: addr, Token: token, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Nodes(); !slices.Equal(got, []string{"node-a", "node-b"}) {
		t.Errorf("nodes %v: the intruder got in or the agent did not", got)
	}
}

func TestNoClusterRefusesSeveralNodes(t *testing.T) {
	_, err := Run(context.Background(), Job{Kind: "whereami", Size: 2, Nodes: 2}, Hooks{})
	if !errors.Is(err, sys.ErrNotSupported) || !strings.Contains(err.Error(), "--launcher") {
		t.Errorf("got %v, want ErrNotSupported naming --launcher", err)
	}
}

// A coordinator that gives up says why: its own timeout, or the job
// stopped around it (a launcher rank died and the launcher ended the rest).
func TestCoordinateSaysWhyItGaveUp(t *testing.T) {
	stopped, stop := context.WithCancel(context.Background())
	stop()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"timeout", context.Background(), "1 of 2 launcher processes joined within 10ms"},
		{"stopped", stopped, "stopped with 1 of 2 launcher processes (the launcher's ranks) joined: context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ClusterConfig{LSize: 2, RendezvousFile: filepath.Join(t.TempDir(), "rendezvous"), Timeout: 10 * time.Millisecond, BindIP: "127.0.0.1"}
			c, err := Coordinate(tc.ctx, cfg)
			if err == nil {
				c.Close()
				t.Fatal("a cluster of 2 formed with no second launcher process")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
}
