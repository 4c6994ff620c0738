package sweep

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/tuner/search"
)

// Rounds beyond a stage's plan go where a wrong decision costs the most.
// Each is priced: its stake is the expected loss of the decision the stage
// would take if it stopped now (search.Comparison.ExpectedLoss, the worst
// of its unsettled sizes), and it runs only while that stake is worth the
// time it takes out of what the budget leaves after the required work
// (stakePrice). With time to spare every unsettled comparison gets its
// rounds; as the budget runs out only large stakes do, so that the
// confirmation's few per cent of geometry cannot spend what the transport
// stage needs for a 40% gap.

// stakeFloor and stakeRounds set the price of a round: an expected loss of
// stakeFloor buys a round while the spare time would pay for stakeRounds of
// them, and the price rises as the spare shrinks (10× with two rounds'
// worth left).
const (
	stakeFloor  = 0.005
	stakeRounds = 20
)

// stakePrice is the expected loss an optional round of cost seconds must
// have at stake with spare seconds of optional budget left.
func stakePrice(cost, spare float64) float64 {
	if spare <= 0 {
		return math.Inf(1)
	}
	return stakeFloor * stakeRounds * cost / spare
}

// worthRound says whether an optional round of cands at sizes, with stake
// at stake, is worth its time. A round refused is recorded under its first
// trial's budget-stop key, so that a resume or tune replays the refusal as
// it replays a budget cut, and said once per stage in the notes. Replays
// decide nothing here: the store says what the run measured.
func (r *Runner) worthRound(stage string, cands []candidate, sizes []int, round int, stake float64) (bool, error) {
	if r.replayOnly || len(cands) == 0 {
		return true, nil
	}
	first := candidateOrder(cands, round)[0]
	key := Trial{Stage: stage, Candidate: first.name, Transport: first.transport, Options: first.opts,
		Pattern: bench.Bandwidth, Sizes: sortedSizes(sizes), Round: round}.key()
	if r.store.Has(key) {
		return true, nil // measured before a kill: the resumed run goes on as the run did
	}
	cost := roundCost(r.pace(), r.plan, stage, len(cands), sizes)
	spare := (r.remaining() - r.requiredAfter(stage)).Seconds()
	price := stakePrice(cost, spare)
	if stake >= price {
		return true, nil
	}
	if !slices.Contains(r.stakeStops, stage) {
		r.stakeStops = append(r.stakeStops, stage)
		r.notes = append(r.notes, fmt.Sprintf("budget: %s's extra rounds stopped at round %d: %.1f%% expected loss at stake, below the %.1f%% a round of %v was worth with %v to spare",
			stage, round, 100*stake, 100*price, time.Duration(cost*float64(time.Second)).Round(100*time.Millisecond), time.Duration(max(spare, 0)*float64(time.Second)).Round(time.Second)))
	}
	return false, r.recordBudgetStop(key)
}

// roundCost is the seconds of one round of n candidates' bandwidth trials
// at sizes, at pace pc.
func roundCost(pc pace, p Plan, stage string, n int, sizes []int) float64 {
	return float64(n) * pc.seconds(p, plannedTrial{stage: stage, count: n, pattern: bench.Bandwidth, sizes: sizes})
}

// stakeOf is the stake of stopping a comparison of a against b now, at
// sizes, paired over the rounds of stage, the noise pooled by size over
// every size measured: the expected loss of keeping a (chooseB false) or
// taking b, the worst over sizes.
func stakeOf(trials []Trial, stage, a, b string, sizes []int, chooseB bool) float64 {
	am, bm := roundMedians(trials, stage, a, bench.Bandwidth), roundMedians(trials, stage, b, bench.Bandwidth)
	var prior search.Priors
	ratios := map[int][]float64{}
	for n := range am {
		ratios[n] = roundRatios(am[n], bm[n])
		prior = append(prior, search.SizedRounds{Size: n, D: ratios[n]})
	}
	stake := 0.0
	for _, n := range sizes {
		stake = math.Max(stake, search.Paired(ratios[n], prior.At(n)).ExpectedLoss(chooseB))
	}
	return stake
}

// sortedSizes is sizes in ascending order, a copy.
func sortedSizes(sizes []int) []int {
	s := slices.Clone(sizes)
	slices.Sort(s)
	return s
}
