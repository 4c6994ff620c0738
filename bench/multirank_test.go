package bench_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/launch"
)

// Every multi-rank pattern, 4 real rank processes, every payload byte
// checked, over the node-local transports and tcp. Few iterations: the
// ranks may outnumber the cores.
func TestMultiRankPatternsValidated(t *testing.T) {
	over := []string{"sm", "cma", "tcp"}
	for _, tr := range over {
		for _, pat := range bench.MultiPatterns {
			t.Run(tr+"/"+string(pat), func(t *testing.T) {
				spec := bench.Spec{Transport: tr, Pattern: pat, Ranks: 4, Sizes: []int{8, 70000}, Reps: 2, Iters: 3, Warmup: 1,
					Window: 4, Validate: true, CPUs: bench.PlaceRanks(4)}
				res := mustRun(t, spec)
				checkMultiPoints(t, res)
				if res.Spec.Ranks != 4 || !strings.HasPrefix(res.Spec.Placement(), "4 ranks") {
					t.Errorf("spec ranks %d, placement %q", res.Spec.Ranks, res.Spec.Placement())
				}
			})
		}
	}
}

// checkMultiPoints checks a point per size, validated, with the
// pattern's unit and its side values.
func checkMultiPoints(t *testing.T, res bench.Result) {
	t.Helper()
	spec := res.Spec
	if len(res.Points) != len(spec.Sizes) {
		t.Fatalf("%d points for %d sizes", len(res.Points), len(spec.Sizes))
	}
	for _, p := range res.Points {
		if !p.Validated || p.Unit != spec.Pattern.Unit() || len(p.Samples) != spec.Reps {
			t.Errorf("size %d: validated %v, unit %q, %d samples", p.Size, p.Validated, p.Unit, len(p.Samples))
		}
		for _, v := range append(p.Samples, p.Median, p.P50, p.P99) {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("size %d: value %v", p.Size, v)
			}
		}
		switch spec.Pattern {
		case bench.MultiBandwidth, bench.Incast:
			// MB/s and messages/s of the same messages and time.
			if want := p.Median * 1e6 / float64(p.Size); math.Abs(p.MsgRate-want) > 1e-6*want {
				t.Errorf("size %d: %v msg/s, want %v from %v MB/s", p.Size, p.MsgRate, want, p.Median)
			}
		case bench.AllToAll:
			if !(p.RankMin > 0 && p.RankMin <= p.RankMax) {
				t.Errorf("size %d: ranks' min %v, max %v", p.Size, p.RankMin, p.RankMax)
			}
			// A block of steps per AllToAllThrottle peers when scattered,
			// per Spec.Peers (one by default) above.
			n, block := spec.RankCount(), max(spec.Peers, 1)
			if p.Size <= bench.AllToAllScatter {
				block = bench.AllToAllThrottle
			}
			if want := (n - 1 + block - 1) / block; len(p.Steps) != want {
				t.Errorf("size %d: %d step blocks, want %d (%d ranks, %d peers a block)", p.Size, len(p.Steps), want, n, block)
			}
			for k, st := range p.Steps {
				if st.Block != k+1 || !(st.Median > 0 && st.Median <= st.Max) || st.MaxRank < 0 || st.MaxRank >= n {
					t.Errorf("size %d: step block %+v", p.Size, st)
				}
			}
		}
	}
}

// A pair's spec reads as before: ranks 2 is stored as 0.
func TestRanksTwoIsThePair(t *testing.T) {
	spec := bench.Spec{Transport: "sm", Pattern: bench.MultiLatency, Ranks: 2, Sizes: []int{8}}
	if err := spec.Normalize(); err != nil || spec.Ranks != 0 || spec.RankCount() != 2 {
		t.Fatalf("ranks %d (count %d), err %v", spec.Ranks, spec.RankCount(), err)
	}
}

func TestRanksErrorsNameTheFlag(t *testing.T) {
	for _, c := range []struct {
		spec bench.Spec
		want string
	}{
		{bench.Spec{Pattern: bench.MultiBandwidth, Ranks: 1}, "--ranks 1: need at least 2"},
		{bench.Spec{Pattern: bench.Latency, Ranks: 4}, "--pattern latency measures a pair: --ranks 4 needs mbw_mr"},
		{bench.Spec{Pattern: bench.MultiBandwidth, Ranks: 3}, "--ranks 3: mbw_mr pairs rank i with rank i+N/2"},
		{bench.Spec{Pattern: bench.MultiLatency, Ranks: 5}, "--ranks 5: multi_lat pairs"},
		{bench.Spec{Pattern: bench.Incast, Ranks: 4, CPUs: []int{0, 1}}, "--cpus: 2 CPUs for 4 ranks"},
		{bench.Spec{Pattern: bench.AllToAll, Ranks: 3, Nodes: 2, Transport: "tcp"}, "run on one node (--nodes 1)"},
		{bench.Spec{Pattern: bench.Incast, Ranks: 3, Validate: true, Buffers: 8, Window: 8}, "buffers=8 with validate: incast needs at least 16"},
		{bench.Spec{Pattern: bench.Incast, Ranks: 64, Validate: true, Window: 64, Sizes: []int{4 << 20}}, "incast with --validate: rank 0 would keep 4032 receive buffers"},
	} {
		t.Run(c.want, func(t *testing.T) {
			s := c.spec
			if s.Transport == "" {
				s.Transport = "sm"
			}
			if s.Sizes == nil {
				s.Sizes = []int{8}
			}
			err := s.Normalize()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// Odd ranks run where the pattern does not pair them.
func TestIncastAndAllToAllTakeOddRanks(t *testing.T) {
	for _, pat := range []bench.Pattern{bench.Incast, bench.AllToAll} {
		spec := bench.Spec{Transport: "sm", Pattern: pat, Ranks: 3, Sizes: []int{64}, Reps: 1, Iters: 2, Warmup: 1, Window: 2, Validate: true}
		res, err := bench.Run(context.Background(), spec, 0, launch.Hooks{})
		if err != nil {
			t.Fatalf("%s: %v", pat, err)
		}
		checkMultiPoints(t, res)
	}
}

// A byte flipped in rank 1's fifth receive fails the run, in the patterns
// where rank 1 receives payloads.
func TestMultiRankValidationCatchesCorruption(t *testing.T) {
	for _, pat := range []bench.Pattern{bench.MultiLatency, bench.AllToAll} {
		spec := bench.Spec{Transport: "sm-corrupt", Pattern: pat, Ranks: 4, Sizes: []int{4096}, Reps: 1, Iters: 4, Warmup: 1, Validate: true}
		_, err := bench.Run(context.Background(), spec, 0, launch.Hooks{})
		if err == nil || !strings.Contains(err.Error(), "payload validation failed") || !strings.Contains(err.Error(), "byte 3") {
			t.Errorf("%s: got %v, want payload validation failure at byte 3", pat, err)
		}
	}
}

// Above the scatter size alltoall steps through the peers one at a time,
// or Spec.Peers at once, each step's messages in their own buffers: every
// byte arrives whole either way, over 5 ranks (4 peers: a block of 3
// leaves one step of one) and over 4, whose steps pair ranks by XOR.
func TestAllToAllPeersAtOnce(t *testing.T) {
	for _, c := range []struct{ ranks, peers int }{{5, 0}, {5, 2}, {5, 3}, {5, 8}, {4, 0}, {4, 2}} {
		spec := bench.Spec{Transport: "sm", Pattern: bench.AllToAll, Ranks: c.ranks, Sizes: []int{8, 70000}, Peers: c.peers,
			Reps: 1, Iters: 3, Warmup: 1, Validate: true}
		res := mustRun(t, spec)
		checkMultiPoints(t, res)
		if res.Spec.Peers != c.peers {
			t.Errorf("%d ranks, peers %d: the result's spec says %d", c.ranks, c.peers, res.Spec.Peers)
		}
	}
	if _, err := bench.Run(context.Background(), bench.Spec{Transport: "sm", Pattern: bench.AllToAll, Ranks: 3, Sizes: []int{8}, Peers: -1}, 0, launch.Hooks{}); err == nil || !strings.Contains(err.Error(), "peers=-1") {
		t.Errorf("negative peers: %v", err)
	}
}
