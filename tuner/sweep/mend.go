package sweep

import (
	"fmt"
	"math"
	"slices"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/auto"
	"github.com/gotune/gotune/tuner/search"
)

// verifyEvidence is what the verification measured, by size: auto's
// rounds from the last profile verified at that size (a mended profile is
// verified again only where its routes changed) and each single
// transport's rounds.
type verifyEvidence struct {
	sizes   []int
	hashes  []string                           // the profiles verified, in order
	auto    map[int]map[int]float64            // size → round → MB/s
	singles map[string]map[int]map[int]float64 // transport → size → round → MB/s
	names   []string                           // the single transports, sorted
	pooled  map[int]map[int]float64            // size → round → geomean of the singles, where they all run one path
	prior   search.Priors                      // every single against auto at every size
}

// pooledSingles names the singles taken together at the sizes where they
// all run one path: up to the built-in eager limit each sends by sm eager
// with the built-in cell, so the best of their medians would only pick the
// luckiest replicate of that path (with five of them, a few per cent above
// auto on a noisy node); their per-round geomean is the path's measure.
const pooledSingles = "singles(eager)"

// verifyEvidence gathers it from the verification's trials; with hashes,
// only the rounds of auto with those profiles count (the summary shows
// every profile a store verified; a decision rests on the ones this run
// verified).
func (r *Runner) verifyEvidence(hashes ...string) verifyEvidence {
	return r.verifyEvidenceFrom(0, hashes...)
}

// verifyEvidenceFrom is verifyEvidence over the rounds numbered from on.
func (r *Runner) verifyEvidenceFrom(from int, hashes ...string) verifyEvidence {
	ev := verifyEvidence{auto: map[int]map[int]float64{}, singles: map[string]map[int]map[int]float64{}}
	hashOf := map[int]string{}
	for _, t := range r.trials {
		if t.Stage != stageVerify || t.Failed != "" || t.Round < from {
			continue
		}
		if t.Candidate == "auto" && len(hashes) > 0 && !slices.Contains(hashes, t.Options[auto.KeyHash]) {
			continue
		}
		if t.Candidate != "auto" {
			if ev.singles[t.Candidate] == nil {
				ev.singles[t.Candidate] = map[int]map[int]float64{}
				ev.names = append(ev.names, t.Candidate)
			}
			addRound(ev.singles[t.Candidate], t)
			continue
		}
		h := t.Options[auto.KeyHash]
		if !slices.Contains(ev.hashes, h) {
			ev.hashes = append(ev.hashes, h)
		}
		for _, p := range t.Points {
			if hashOf[p.Size] != h { // a later profile's rounds replace an earlier one's
				hashOf[p.Size], ev.auto[p.Size] = h, nil
			}
		}
		addRound(ev.auto, t)
	}
	slices.Sort(ev.names)
	for n := range ev.auto {
		ev.sizes = append(ev.sizes, n)
	}
	slices.Sort(ev.sizes)
	ev.pooled = poolEager(ev.singles, ev.names, defaultSM().Eager)
	for _, n := range ev.sizes {
		for _, s := range ev.names {
			ev.prior = append(ev.prior, search.SizedRounds{Size: n, D: ev.ratios(n, s)})
		}
	}
	return ev
}

// poolEager is, for each size up to eager, each round's geometric mean of
// the singles measured in it; nil with fewer than two singles (verify
// --against measures one profile beside another, nothing to pool).
func poolEager(singles map[string]map[int]map[int]float64, names []string, eager int) map[int]map[int]float64 {
	if len(names) < 2 {
		return nil
	}
	out := map[int]map[int]float64{}
	for n := range singles[names[0]] {
		if n > eager {
			continue
		}
		logs, count := map[int]float64{}, map[int]int{}
		for _, s := range names {
			for round, v := range singles[s][n] {
				if v > 0 {
					logs[round] += math.Log(v)
					count[round]++
				}
			}
		}
		out[n] = map[int]float64{}
		for round, l := range logs {
			out[n][round] = math.Exp(l / float64(count[round]))
		}
	}
	return out
}

// series is single's rounds at size n (pooledSingles: the pooled ones).
func (ev verifyEvidence) series(single string, n int) map[int]float64 {
	if single == pooledSingles {
		return ev.pooled[n]
	}
	return ev.singles[single][n]
}

// ratios are single's per-round log-ratios to auto at size n.
func (ev verifyEvidence) ratios(n int, single string) []float64 {
	return roundRatios(ev.auto[n], ev.series(single, n))
}

// compare is single (B) against auto (A) at size n.
func (ev verifyEvidence) compare(n int, single string) search.Comparison {
	return search.Paired(ev.ratios(n, single), ev.prior.At(n))
}

// verifyLoss is a size where a single transport beat the profile, settled,
// or (Leaned) is believed to lead it by more than the noise at the last
// look (verifyLeans).
type verifyLoss struct {
	Size   int
	Winner string
	Versus search.Comparison
	Leaned bool
}

func (l verifyLoss) String() string {
	return fmt.Sprintf("%s: %s %+.1f%% over auto", transports.FormatSize(l.Size), l.Winner, 100*l.Versus.Gain)
}

// verifyComparisons is the verification's one test a size: the best
// single transport (by the median of its rounds) against auto, paired
// over the rounds of the profiles this run verified; nil before any. One
// test a size: testing every single transport would find a chance win
// among them on a noisy node, and below their eager limit they all run
// the same path anyway.
func (r *Runner) verifyComparisons() []verifyLoss {
	if len(r.verified) == 0 {
		return nil
	}
	ev := r.verifyEvidence(r.verified...)
	out := make([]verifyLoss, 0, len(ev.sizes))
	for _, n := range ev.sizes {
		best := ev.best(n)
		out = append(out, verifyLoss{Size: n, Winner: best, Versus: ev.compare(n, best)})
	}
	return out
}

// fadedLoss is a settled loss that its fresh rounds did not settle again
// (Fresh: the same test over them alone).
type fadedLoss struct {
	verifyLoss
	Fresh search.Comparison
}

// replicated splits losses into those that the verification's rounds
// numbered from on settle again on their own, each the same winner against
// auto at its size, and those they do not. The noise prior stays the whole
// verification's: the fresh rounds measure only the losing sizes.
func (r *Runner) replicated(losses []verifyLoss, from int) (held []verifyLoss, faded []fadedLoss) {
	prior := r.verifyEvidence(r.verified...).prior
	fresh := r.verifyEvidenceFrom(from, r.verified...)
	for _, l := range losses {
		c := search.Paired(fresh.ratios(l.Size, l.Winner), prior.At(l.Size))
		if c.Outcome == search.BWins {
			l.Versus = c
			held = append(held, l)
		} else {
			faded = append(faded, fadedLoss{verifyLoss: l, Fresh: c})
		}
	}
	return held, faded
}

// verifyLosses lists the sizes where the best single transport beats
// auto, settled.
func (r *Runner) verifyLosses() []verifyLoss { return settledLosses(r.verifyComparisons()) }

// settledLosses are the comparisons a single transport won, settled.
func settledLosses(cs []verifyLoss) []verifyLoss {
	var out []verifyLoss
	for _, c := range cs {
		if c.Versus.Outcome == search.BWins {
			out = append(out, c)
		}
	}
	return out
}

// verifyLeans lists the sizes where the best single transport still
// trails auto unsettled at the last look but leans ahead of it.
func (r *Runner) verifyLeans(chosen SMParams) []verifyLoss {
	return leaningLosses(r.verifyComparisons(), chosen)
}

// leaningLosses are the comparisons still unsettled at the last look whose
// single transport leans ahead of auto (search.Comparison.Lean), as the
// transport stage decides its own last look: a test that cannot settle in
// the rounds the budget gave must not leave the size to the route it
// happens to have. Only where a route can change (onEagerPath): on one
// path a lean is the pair's luck, which nothing mends.
func leaningLosses(cs []verifyLoss, chosen SMParams) []verifyLoss {
	var out []verifyLoss
	for _, c := range cs {
		if !onEagerPath(chosen, c.Size) && c.Versus.Outcome == search.Unsettled && c.Versus.Lean() == search.BWins {
			c.Leaned = true
			out = append(out, c)
		}
	}
	return out
}

// onEagerPath says whether n bytes go by sm eager for the single
// transports (the built-in limit) or for auto (the chosen one): there the
// route is sm's whatever the verification finds, and only parameters can
// differ, so no route mends a loss.
func onEagerPath(chosen SMParams, n int) bool { return n <= max(chosen.Eager, defaultSM().Eager) }

// verifyTrails lists the sizes where the round-paired median of auto over
// the best single transport is below 1 - search.Noise and no test has
// settled it (a settled loss is mended instead).
func (r *Runner) verifyTrails(sizes []int) []int {
	ev := r.verifyEvidence(r.verified...)
	var out []int
	for _, n := range sizes {
		bestName := ev.best(n)
		pr, ok := pairedRatio(ev.auto[n], ev.series(bestName, n))
		if ok && pr < 1-search.Noise && ev.compare(n, bestName).Outcome != search.BWins {
			out = append(out, n)
		}
	}
	return out
}

// stillTrailing lists the sizes of faded whose round-paired median of
// auto over their winner is below 1 - search.Noise, settled over all
// rounds or not: their loss was decided by the fresh rounds alone.
func (r *Runner) stillTrailing(faded []fadedLoss) []int {
	ev := r.verifyEvidence(r.verified...)
	var out []int
	for _, f := range faded {
		if pr, ok := pairedRatio(ev.auto[f.Size], ev.series(f.Winner, f.Size)); ok && pr < 1-search.Noise {
			out = append(out, f.Size)
		}
	}
	return out
}

// best is the single transport with the highest median at size n, or
// pooledSingles where the singles all run one path.
func (ev verifyEvidence) best(n int) string {
	if len(ev.pooled[n]) > 0 {
		return pooledSingles
	}
	best, name := 0.0, ""
	for _, s := range ev.names {
		if m := medianOf(ev.singles[s][n]); m > best {
			best, name = m, s
		}
	}
	return name
}

// mendRanges routes each losing size to the transport that won it in the
// verification, settled or leaning (its verdict in out.Transport replaced
// or added, marked Mended), recomputes the ranges, and returns the sizes of ladder whose
// transport changed. Nothing is mended (none) where the loss is to a
// parameter, not a route: up to the larger of the profile's and the
// built-in eager limits every single transport sends by sm eager with
// the built-in cell, and a loss to sm where sm carries the size already
// is one to sm's built-in parameters.
func mendRanges(out *Outcome, losses []verifyLoss, ladder []int) []int {
	driverOf := driversOf(out.Candidates)
	before := out.Ranges
	verdicts := slices.Clone(out.Transport)
	for _, l := range losses {
		if onEagerPath(out.SM, l.Size) || driverOf[l.Winner] == "" {
			continue
		}
		v := SizeVerdict{Size: l.Size, Winner: l.Winner, Versus: l.Versus, Settled: !l.Leaned, Leaned: l.Leaned, Mended: true}
		i, found := slices.BinarySearchFunc(verdicts, l.Size, func(v SizeVerdict, n int) int { return v.Size - n })
		if found {
			v.Medians = verdicts[i].Medians
			verdicts[i] = v
		} else {
			verdicts = slices.Insert(verdicts, i, v)
		}
	}
	after := rangesFrom(out.SM.Eager, verdicts, driverOf)
	var changed []int
	for _, n := range ladder {
		if routeAt(before, n) != routeAt(after, n) {
			changed = append(changed, n)
		}
	}
	if len(changed) > 0 {
		out.Transport, out.Ranges = verdicts, after
	}
	return changed
}

// routeAt is the range that carries size n.
func routeAt(ranges []Range, n int) Range {
	var at Range
	for _, rg := range ranges {
		if rg.Min <= n {
			at = rg
		}
	}
	at.Min = 0
	return at
}

// VerifyRatio is auto over one single transport at one size of the
// verification, round-paired: the median of the rounds' ratios of their
// medians, and the lowest and highest of those ratios.
type VerifyRatio struct {
	Size                 int
	Paired, Lowest, High float64
	Rounds               int
}

// VerifyRatios reads a store's verification trials as the summary does (at
// a mended size, auto's rounds are its new profile's): per single
// transport, auto over it at each size it was measured beside auto.
func VerifyRatios(trials []Trial) map[string][]VerifyRatio {
	ev := (&Runner{trials: trials}).verifyEvidence()
	out := map[string][]VerifyRatio{}
	for _, s := range ev.names {
		for _, n := range ev.sizes {
			rs := ratiosByRound(ev.auto[n], ev.singles[s][n])
			if len(rs) == 0 {
				continue
			}
			out[s] = append(out[s], VerifyRatio{Size: n, Paired: search.Median(rs), Lowest: slices.Min(rs), High: slices.Max(rs), Rounds: len(rs)})
		}
	}
	return out
}
