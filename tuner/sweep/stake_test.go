package sweep

import (
	"maps"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
	"github.com/gotune/gotune/tuner/store"
)

// A round costs every candidate's trial.
func TestRoundCost(t *testing.T) {
	p, sizes := Quick(), []int{64 << 10}
	one := pace{}.seconds(p, plannedTrial{stage: stageTransport, count: 1, pattern: bench.Bandwidth, sizes: sizes})
	if got := roundCost(pace{}, p, stageTransport, 3, sizes); math.Abs(got-3*one) > 1e-12 || one <= 0 {
		t.Fatalf("roundCost of 3 candidates = %v, want 3 x %v", got, one)
	}
}

func TestStakePrice(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cost, spare float64
		want        float64
	}{
		{"time for stakeRounds rounds: the floor", 1, stakeRounds, stakeFloor},
		{"ten times that: a tenth", 1, 10 * stakeRounds, stakeFloor / 10},
		{"two rounds' worth: ten times the floor", 1, 2, 10 * stakeFloor},
		{"nothing to spare", 1, 0, math.Inf(1)},
		{"over budget", 1, -5, math.Inf(1)},
	} {
		if got := stakePrice(tc.cost, tc.spare); math.Abs(got-tc.want) > 1e-12 && got != tc.want {
			t.Errorf("%s: stakePrice(%v, %v) = %v, want %v", tc.name, tc.cost, tc.spare, got, tc.want)
		}
	}
}

// pairedRounds fabricates n bandwidth rounds of stage for a and b at
// sizes, b's value a's times ratios[round].
func pairedRounds(stage, a, b string, sizes []int, ratios []float64) []Trial {
	var out []Trial
	for i, q := range ratios {
		ta := Trial{Stage: stage, Candidate: a, Transport: "sm", Pattern: bench.Bandwidth, Sizes: sizes, Round: i + 1, Seconds: 0.5}
		tb := ta
		tb.Candidate, tb.Points = b, nil
		for _, n := range sizes {
			ta.Points = append(ta.Points, bench.Point{Size: n, Samples: []float64{1000}})
			tb.Points = append(tb.Points, bench.Point{Size: n, Samples: []float64{1000 * q}})
		}
		out = append(out, ta, tb)
	}
	return out
}

// With the budget short, the extra rounds go to the large stake: the
// transport stage's unsettled 40% gap buys its round, the confirmation's
// unsettled few per cent does not, and that refusal is on record for a
// replay. With time to spare both get their rounds.
func TestExtraRoundsGoToTheLargerStake(t *testing.T) {
	sizes := []int{64 << 10}
	confirm := pairedRounds(stageConfirm, "chosen", "built-in", sizes, []float64{1.06, 0.99, 1.04, 0.98, 1.05, 1.0, 1.03, 0.99})
	transport := pairedRounds(stageTransport, "sm", "cma", sizes, []float64{1.5, 1.1, 1.7})
	confirmStake := stakeOf(confirm, stageConfirm, "chosen", "built-in", sizes, false)
	transportStake := stakeOf(transport, stageTransport, "sm", "cma", sizes, false)
	if confirmStake > 0.03 || transportStake < 0.2 {
		t.Fatalf("premises: confirmation's stake %.3f, transport's %.3f", confirmStake, transportStake)
	}
	confirmCands := []candidate{{name: "chosen", transport: "sm"}, {name: "built-in", transport: "sm"}}
	transportCands := []candidate{{name: "sm", transport: "sm"}, {name: "cma", transport: "cma"}}

	for _, tc := range []struct {
		name           string
		roundsToSpare  float64
		confirmRefused bool
	}{
		{"four rounds to spare", 4, true},
		{"a hundred rounds to spare", 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := store.Open(filepath.Join(t.TempDir(), MeasurementsFile))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			r := &Runner{plan: Quick(), store: s, trials: append(confirm, transport...)}
			// The budget leaves roundsToSpare rounds of the stage beyond
			// the required work after it.
			spare := func(stage string, cands []candidate) {
				cost := roundCost(r.pace(), r.plan, stage, len(cands), sizes)
				r.start, r.budget = time.Now(), r.requiredAfter(stage)+time.Duration(tc.roundsToSpare*cost*float64(time.Second))
			}
			spare(stageConfirm, confirmCands)
			ok, err := r.worthRound(stageConfirm, confirmCands, sizes, 9, confirmStake)
			if err != nil {
				t.Fatal(err)
			}
			if ok == tc.confirmRefused {
				t.Fatalf("confirmation's round with %.1f%% at stake: worth %v, want %v (notes %q)", 100*confirmStake, ok, !tc.confirmRefused, r.notes)
			}
			spare(stageTransport, transportCands)
			if ok, err := r.worthRound(stageTransport, transportCands, sizes, 4, transportStake); err != nil || !ok {
				t.Fatalf("transport's round with %.0f%% at stake: worth %v (%v), want true", 100*transportStake, ok, err)
			}
			if !tc.confirmRefused {
				return
			}
			if !strings.Contains(strings.Join(r.notes, "\n"), "budget: confirm's extra rounds stopped at round 9") {
				t.Errorf("notes %q do not say why the round was refused", r.notes)
			}
			first := candidateOrder(confirmCands, 9)[0]
			key := Trial{Stage: stageConfirm, Candidate: first.name, Transport: first.transport, Pattern: bench.Bandwidth, Sizes: sizes, Round: 9}.key()
			if !s.Has(budgetStopKey(key)) {
				t.Errorf("the refusal is not on record for a replay")
			}
		})
	}
}

// The verification's single transports run with what the node requires
// of any alternative: a ring it affords at the profile's ranks per node,
// and the progress thread where the profile has it for safety.
func TestReferenceOptions(t *testing.T) {
	thread := &profile.Profile{Decisions: map[string]map[string]profile.Decision{profile.Intranode: {profile.HostHost: {Progress: "thread"}}}}
	poll := &profile.Profile{Decisions: map[string]map[string]profile.Decision{profile.Intranode: {profile.HostHost: {Progress: "poll"}}}}
	builtin := defaultSM()
	halved := builtin
	halved.Slots /= 2
	full, half := nodeBytes(builtin, 32), nodeBytes(halved, 32)
	for _, tc := range []struct {
		name string
		mem  int64 // node memory; 32 ranks per node
		p    *profile.Profile
		want transports.Options
	}{
		{"the built-in ring fits, polling progress", 2 * memoryShare * full, poll, nil},
		{"the built-in ring fits, the progress thread", 2 * memoryShare * full, thread, transports.Options{sm.KeyProgress: "thread"}},
		{"half the ring fits", memoryShare * (full + half) / 2, poll, transports.Options{sm.KeyFrag: itoa(builtin.Frag), sm.KeyFrags: itoa(builtin.Slots / 2)}},
		{"both", memoryShare * (full + half) / 2, thread, transports.Options{sm.KeyFrag: itoa(builtin.Frag), sm.KeyFrags: itoa(builtin.Slots / 2), sm.KeyProgress: "thread"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Runner{plan: Quick()}
			r.plan.RanksPerNode = 32
			r.meta.Provenance.MemBytes = tc.mem
			if got := r.referenceOptions(tc.p); !maps.Equal(got, tc.want) {
				t.Fatalf("referenceOptions = %v, want %v", got, tc.want)
			}
		})
	}
}
