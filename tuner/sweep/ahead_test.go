package sweep

import (
	"slices"
	"testing"
	"time"

	"github.com/gotune/gotune/bench"
)

func TestTrialWork(t *testing.T) {
	p := Plan{Reps: 3, Window: 64, RepBytes: 64 << 20}
	tests := []struct {
		name    string
		plan    Plan
		pattern bench.Pattern
		sizes   []int
		want    float64
	}{
		// 16 MiB: the cap leaves 2 iterations (and 1 warm-up) of 64 messages.
		{"bw capped", p, bench.Bandwidth, []int{16 << 20}, (3*2 + 1) * 64 * (16 << 20)},
		// 4 KiB: OSU's 100 iterations and 10 warm-up windows fit the cap.
		{"bw small", p, bench.Bandwidth, []int{4 << 10}, (3*100 + 10) * 64 * (4 << 10)},
		// Latency: a window of 1, each round trip twice the payload and
		// latencyTripBytes.
		{"latency", p, bench.Latency, []int{8}, (3*10000 + 100) * (2*8 + latencyTripBytes)},
		// The settling pass: one repetition of the capped 2 iterations.
		{"settle", Plan{Reps: 3, Window: 64, RepBytes: 64 << 20, Settle: 4 << 20}, bench.Bandwidth, nil, (1*2 + 1) * 64 * (4 << 20)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := trialWork(tc.plan, tc.pattern, tc.sizes); got != tc.want {
				t.Fatalf("trialWork = %v, want %v", got, tc.want)
			}
		})
	}
}

// The estimate of required work shrinks as a sweep goes through its
// stages, and a run measured slower than the fallback pace reserves
// proportionally more.
func TestRequiredAfterFollowsPace(t *testing.T) {
	r := &Runner{plan: Quick()}
	var last time.Duration = 1 << 62
	for _, st := range stageOrder {
		got := r.requiredAfter(st)
		if got > last {
			t.Fatalf("required after %s = %v, more than after the stage before (%v)", st, got, last)
		}
		last = got
	}
	quiet := r.requiredAfter(stageEager)
	probes := probeReserve(r.plan) + 10*time.Second
	// A run whose trials take three times the fallback pace, a small one
	// and a large one, reserves about three times as much.
	var trials []Trial
	for _, sizes := range [][]int{{8}, {16 << 20}} {
		tr := Trial{Stage: stageEager, Pattern: bench.Bandwidth, Sizes: sizes, Round: 1}
		tr.Seconds = 3 * hostSecPerByte * trialWork(r.plan, tr.Pattern, tr.Sizes)
		trials = append(trials, tr)
	}
	r.trials = trials
	loaded := r.requiredAfter(stageEager)
	if ratio := float64(loaded-probes) / float64(quiet-probes); ratio < 2 || ratio > 3.5 {
		t.Fatalf("trials at 3x the pace: required work %v against %v (ratio %.2f of the measured part), want about 3", loaded, quiet, ratio)
	}
	// A run whose first trials are small and slow to start (their time
	// mostly the start) does not price the large ones by their bytes.
	r.trials = []Trial{{Stage: stageEager, Pattern: bench.Latency, Sizes: []int{8}, Round: 1, Seconds: 0.4}}
	if startHeavy := r.requiredAfter(stageEager); startHeavy > 3*quiet {
		t.Fatalf("one small trial of 0.4 s: required work %v, against %v at the fallback pace", startHeavy, quiet)
	}
	// Node trials ten times slower than pairs (14 ranks to start, 7 pairs
	// to move) do not price the pair trials after the geometry stages.
	pair := Trial{Stage: stageFragment, Pattern: bench.Bandwidth, Sizes: []int{16 << 20}, Round: 1}
	pair.Seconds = hostSecPerByte * trialWork(r.plan, pair.Pattern, pair.Sizes)
	r.trials = []Trial{pair}
	pairsOnly := r.requiredAfter(stageDepth)
	for range 4 {
		node := Trial{Stage: stageFragment, Pattern: bench.MultiBandwidth, Sizes: []int{16 << 20}, Round: 1, Ranks: 14}
		node.Seconds = 10 * hostSecPerByte * trialWork(r.plan, node.Pattern, node.Sizes)
		r.trials = append(r.trials, node)
	}
	if withNodes := r.requiredAfter(stageDepth); withNodes > pairsOnly+pairsOnly/10 {
		t.Fatalf("after slow node trials the pair stages reserve %v, against %v priced by the pair trial alone", withNodes, pairsOnly)
	}
}

// plannedCovers fails unless the required trials the budget reserves for
// include every stage and pattern the run measured a first round of, at
// the sizes it measured them, at least as many times.
func plannedCovers(t *testing.T, dir string, plan Plan) {
	t.Helper()
	type kind struct {
		stage   string
		pattern bench.Pattern
	}
	ran := map[kind]int{}
	sizes := map[kind][]int{}
	for _, tr := range storedTrials(t, dir) {
		if tr.Round != 1 || tr.Stage == "transport-replicate" { // a stage of the stored runs, gone since
			continue
		}
		k := kind{tr.Stage, tr.Pattern}
		if sizes[k] == nil {
			sizes[k] = tr.Sizes
		}
		if slices.Equal(sizes[k], tr.Sizes) { // bisection's first rounds are optional
			ran[k]++
		}
	}
	planned := map[kind]plannedTrial{}
	for _, pt := range requiredTrials(plan, 1, 0) {
		planned[kind{pt.stage, pt.pattern}] = pt
	}
	for k, n := range ran {
		pt, ok := planned[k]
		switch {
		case !ok:
			t.Errorf("stage %s measured %s, which the budget's estimate does not plan", k.stage, k.pattern)
		case pt.count < n:
			t.Errorf("stage %s %s: %d first-round trials, %d planned", k.stage, k.pattern, n, pt.count)
		case k.stage == stageDepth && len(pt.sizes) != len(sizes[k]):
			// Depth adds the eager limit chosen and its double; the
			// estimate takes the built-in one.
			t.Errorf("stage %s %s: measured at %v, planned at %v", k.stage, k.pattern, sizes[k], pt.sizes)
		case k.stage != stageDepth && !slices.Equal(pt.sizes, sizes[k]):
			t.Errorf("stage %s %s: measured at %v, planned at %v", k.stage, k.pattern, sizes[k], pt.sizes)
		}
	}
	if len(ran) == 0 {
		t.Fatal("no first-round trial stored")
	}
}

// The budget's reserve holds every round of the transport stage the plan
// asks for, not only its first: with one round no transport gap settles,
// and sm would keep every size by construction.
func TestReserveHoldsEveryTransportRound(t *testing.T) {
	p := Quick()
	for _, pt := range requiredTrials(p, 1, 0) {
		if pt.stage == stageTransport {
			if want := len(p.Transports) * p.Rounds; pt.count != want {
				t.Fatalf("transport trials reserved: %d, want %d (%d transports x %d rounds)", pt.count, want, len(p.Transports), p.Rounds)
			}
			return
		}
	}
	t.Fatal("no transport trials reserved")
}

// The reserve before the transport stage holds its extra work too: the
// geometry stages' extra rounds give way to bisecting a crossover and to
// more rounds at unsettled transport sizes.
func TestReserveHoldsTransportExtraWork(t *testing.T) {
	with := Quick()
	without := Quick()
	without.Bisect, without.MaxRound = false, without.Rounds
	r := &Runner{plan: with}
	withSec := r.requiredAfter(stageDepth)
	r.plan = without
	withoutSec := r.requiredAfter(stageDepth)
	if withSec <= withoutSec {
		t.Fatalf("required after depth: %v with bisection and extra rounds, %v without", withSec, withoutSec)
	}
	// After the transport stage its extra work is no longer held.
	r.plan = with
	after := r.requiredAfter(stageTransport)
	r.plan = without
	if afterWithout := r.requiredAfter(stageTransport); after != afterWithout {
		t.Errorf("required after transport: %v with bisection and extra rounds, %v without: still held", after, afterWithout)
	}
}

// Every stage a plan plans trials for has its place in stageOrder: a
// stage missing there would reserve nothing before it and count every
// stage as after it.
func TestPlannedStagesAreOrdered(t *testing.T) {
	for _, p := range []Plan{Quick(), GPU()} {
		for _, pt := range requiredTrials(p, 2, 0) {
			if stageIndex(pt.stage) < 0 {
				t.Errorf("plan %s: stage %q is not in stageOrder", p.Name, pt.stage)
			}
		}
	}
}
