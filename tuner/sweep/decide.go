package sweep

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/bytesize"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
	"github.com/gotune/gotune/tuner/search"
)

// candidate is one configuration a stage weighs. Among candidates within
// search.Noise of the best score the cheapest wins: less memory per pair,
// or the simpler setting.
type candidate struct {
	name      string
	transport string
	opts      transports.Options // what the trials pass to the ranks, rendered from the typed fields
	cost      int64
	nodes     int // the pair spans this many nodes (0: one)
	// The typed parameters the candidate stands for, read back when it is
	// chosen: sm by the host stages, alloc by the allocator stages, gpu by
	// the GPU stages (only the field a stage varies).
	sm    SMParams
	alloc AllocParams
	gpu   GPUParams
}

// samplesOf gathers a candidate's repetitions per size of one pattern over
// every trial of a stage. ok is false when any of its trials failed (it
// hung): such a candidate is out.
func samplesOf(trials []Trial, stage, cand string, pattern bench.Pattern) (map[int][]float64, bool) {
	return gather(trials, stage, cand, pattern, func(s []float64) []float64 { return s })
}

// trialMedians is samplesOf with one value per trial and size: the median
// of its repetitions. Repetitions of one trial share processes, pinning and
// buffers; trials are the independent measurements a test may count.
func trialMedians(trials []Trial, stage, cand string, pattern bench.Pattern) (map[int][]float64, bool) {
	return gather(trials, stage, cand, pattern, func(s []float64) []float64 { return []float64{search.Median(s)} })
}

// roundMedians is trialMedians keyed by round as well (size → round →
// median), for ratios of trials measured side by side in one round.
func roundMedians(trials []Trial, stage, cand string, pattern bench.Pattern) map[int]map[int]float64 {
	out := map[int]map[int]float64{}
	for _, t := range trials {
		if t.Stage != stage || t.Candidate != cand || t.Pattern != pattern || t.Failed != "" {
			continue
		}
		addRound(out, t)
	}
	return out
}

// addRound adds trial t's medians to m (size → round → value).
func addRound(m map[int]map[int]float64, t Trial) {
	for _, p := range t.Points {
		if len(p.Samples) == 0 {
			continue
		}
		if m[p.Size] == nil {
			m[p.Size] = map[int]float64{}
		}
		m[p.Size][t.Round] = search.Median(p.Samples)
	}
}

// pairedRatio is the median over the rounds both have of a's median over
// b's: each round's pair ran back to back, so a slow spell of the machine
// that spans a round scales both and cancels, where it would move a
// median of medians taken apart. ok is false without a common round.
func pairedRatio(a, b map[int]float64) (ratio float64, ok bool) {
	rs := ratiosByRound(a, b)
	if len(rs) == 0 {
		return 0, false
	}
	return search.Median(rs), true
}

// ratiosByRound is a's value over b's in each round both have.
func ratiosByRound(a, b map[int]float64) []float64 {
	var rs []float64
	for round, av := range a {
		if bv, found := b[round]; found && bv > 0 {
			rs = append(rs, av/bv)
		}
	}
	return rs
}

// gather collects, per size, what values makes of each trial's samples.
func gather(trials []Trial, stage, cand string, pattern bench.Pattern, values func([]float64) []float64) (map[int][]float64, bool) {
	out := map[int][]float64{}
	for _, t := range trials {
		if t.Stage != stage || t.Candidate != cand {
			continue
		}
		if t.Failed != "" {
			return nil, false
		}
		if t.Pattern != pattern {
			continue
		}
		for _, p := range t.Points {
			if len(p.Samples) > 0 {
				out[p.Size] = append(out[p.Size], values(p.Samples)...)
			}
		}
	}
	return out, len(out) > 0
}

// Score is one candidate's standing in a stage.
type Score struct {
	Candidate string
	Value     float64 // geometric mean over the common points; higher is better
	Cost      int64
	Dropped   string // why it is out, if it is
	// LosesAt names a point where the best candidate beats this one by a
	// settled test: it cannot be chosen, whatever its score.
	LosesAt string
	// Trails lists the sizes where the best candidate leads this one by
	// more than search.Noise without a settled test: more rounds there
	// could rule it out (confirmStage takes them).
	Trails []int
	Chosen bool
}

// StageDecision is what a stage concluded.
type StageDecision struct {
	Stage    string
	Patterns []bench.Pattern
	Sizes    []int
	Scores   []Score
	Chosen   string // "" when nothing could be decided (defaults stand)
	// Reference is the candidate the others were held against (pickAgainst);
	// "" when it was the best scorer (also when the reference was dropped).
	Reference string
}

// point is one (pattern, size) that candidates are scored on.
type point struct {
	pattern bench.Pattern
	size    int
}

// pickCheapest scores every candidate by the geometric mean, over the
// (pattern, size) points all surviving candidates have, of its value at
// each point: the median of its round-normalised values (stageValues;
// latency inverted, so higher is better everywhere). It chooses the
// cheapest within search.Noise of the best that the best does not beat at
// any single point (U test over the same per-round values): a geomean over
// many sizes would otherwise hide a real loss at one of them
// (docs/tuner.md, Decision rules).
func pickCheapest(trials []Trial, stage string, patterns []bench.Pattern, cands []candidate) StageDecision {
	return pick(trials, stage, patterns, cands, "", nil)
}

// samePath says whether candidates a and b move an n-byte message the
// same way, so that a difference between them there is noise alone.
type samePath func(a, b candidate, n int) bool

// sameProtocol is the eager stage's samePath: two eager limits send a
// size alike when both send it eager or both pipeline it. Why: scored
// over every size, a real loss at the one or two sizes between two limits
// was diluted by noise at the sizes both send alike (an eager limit of 2
// KiB chosen over 4 KiB on a 1.4% score while 4 KiB messages lost 17%).
func sameProtocol(a, b candidate, n int) bool { return (n <= a.sm.Eager) == (n <= b.sm.Eager) }

// pickWhereTheyDiffer is pickCheapest scored only at the points where some
// candidates take different paths (same), each candidate held against the
// best only where the two differ.
func pickWhereTheyDiffer(trials []Trial, stage string, patterns []bench.Pattern, cands []candidate, same samePath) StageDecision {
	return pick(trials, stage, patterns, cands, "", same)
}

// pickAgainst is pickCheapest with a reference candidate ref ("": the
// best-scoring one): a candidate must be within search.Noise of ref's
// score and beaten by ref at no point; ref itself always qualifies. With
// the incumbent as ref, a challenger must hold up against it, and the
// incumbent cannot be ruled out by a chance loss at one of many points to
// a challenger that scored higher by chance.
func pickAgainst(trials []Trial, stage string, patterns []bench.Pattern, cands []candidate, ref string) StageDecision {
	return pick(trials, stage, patterns, cands, ref, nil)
}

// pick is pickAgainst; with same, points where every candidate takes one
// path are not scored, and a candidate is held against the best only at
// the points where their paths differ.
func pick(trials []Trial, stage string, patterns []bench.Pattern, cands []candidate, ref string, same samePath) StageDecision {
	d := StageDecision{Stage: stage, Patterns: patterns}
	samples := map[string]map[point][]float64{}
	perTrial := map[string]map[point][]float64{} // one median per trial
	var common []point
	first := true
	for _, c := range cands {
		all := map[point][]float64{}
		out := false
		for _, pat := range patterns {
			s, ok := samplesOf(trials, stage, c.name, pat)
			if !ok && failedIn(trials, stage, c.name) {
				out = true
			}
			for n, v := range s {
				all[point{pat, n}] = v
			}
		}
		if out || len(all) == 0 {
			continue
		}
		samples[c.name] = all
		perTrial[c.name] = map[point][]float64{}
		for _, pat := range patterns {
			m, _ := trialMedians(trials, stage, c.name, pat) // a failed trial put the candidate out above
			for n, v := range m {
				perTrial[c.name][point{pat, n}] = v
			}
		}
		var keep []point
		for pt := range all {
			if first || slices.Contains(common, pt) {
				keep = append(keep, pt)
			}
		}
		common, first = keep, false
	}
	if same != nil {
		differ := slices.DeleteFunc(slices.Clone(common), func(pt point) bool { return allSame(cands, same, pt.size) })
		if len(differ) > 0 { // else the candidates are one path wherever measured: score it all
			common = differ
		}
	}
	slices.SortFunc(common, func(a, b point) int {
		if a.pattern != b.pattern {
			return strings.Compare(string(a.pattern), string(b.pattern))
		}
		return a.size - b.size
	})
	for _, pt := range common {
		if !slices.Contains(d.Sizes, pt.size) {
			d.Sizes = append(d.Sizes, pt.size)
		}
	}
	sort.Ints(d.Sizes)
	values := stageValues(trials, stage, cands, samples, perTrial, common)
	best, bestName := 0.0, ""
	for _, c := range cands {
		sc := Score{Candidate: c.name, Cost: c.cost}
		_, ok := samples[c.name]
		switch {
		case !ok && failedIn(trials, stage, c.name):
			sc.Dropped = "hung (watchdog)"
		case !ok:
			sc.Dropped = "not measured"
		case len(common) == 0:
			sc.Dropped = "no common sizes"
		default:
			logSum := 0.0
			for _, pt := range common {
				logSum += math.Log(values[c.name][pt].score)
			}
			sc.Value = math.Exp(logSum / float64(len(common)))
			if sc.Value > best {
				best, bestName = sc.Value, c.name
			}
		}
		d.Scores = append(d.Scores, sc)
	}
	for _, sc := range d.Scores {
		if ref != "" && sc.Candidate == ref && sc.Dropped == "" {
			best, bestName, d.Reference = sc.Value, ref, ref
		}
	}
	prior := pointPrior(values, bestName, common)
	for i, sc := range d.Scores {
		if sc.Dropped != "" || sc.Candidate == bestName {
			continue
		}
		bestCand, cand := find(cands, bestName), find(cands, sc.Candidate)
		for _, pt := range common {
			if same != nil && same(*bestCand, *cand, pt.size) {
				continue // one path: a difference here is noise
			}
			cmp := comparePoint(values[bestName][pt], values[sc.Candidate][pt], prior.At(pt.size))
			if cmp.Outcome == search.AWins {
				d.Scores[i].LosesAt = fmt.Sprintf("%s %s %s", pt.pattern, transports.FormatSize(pt.size), cmp)
				d.Scores[i].Trails = nil
				break
			}
			if cmp.Outcome == search.Unsettled && cmp.Gain < 0 && !slices.Contains(d.Scores[i].Trails, pt.size) {
				d.Scores[i].Trails = append(d.Scores[i].Trails, pt.size)
			}
		}
	}
	chosen := -1
	for i, sc := range d.Scores {
		if sc.Dropped != "" || sc.LosesAt != "" || sc.Value < (1-search.Noise)*best {
			continue
		}
		if chosen < 0 || sc.Cost < d.Scores[chosen].Cost || (sc.Cost == d.Scores[chosen].Cost && sc.Value > d.Scores[chosen].Value) {
			chosen = i
		}
	}
	if chosen >= 0 {
		d.Scores[chosen].Chosen = true
		d.Chosen = d.Scores[chosen].Candidate
	}
	return d
}

// allSame says whether every candidate moves an n-byte message alike.
func allSame(cands []candidate, same samePath, n int) bool {
	for _, c := range cands[1:] {
		if !same(cands[0], c, n) {
			return false
		}
	}
	return true
}

// pointValues is one candidate's standing at one point, oriented so that
// higher is better (latency inverted): score, and one value per trial;
// where rounds holds each value's round, the values of every candidate
// at the point are of the same rounds, in the same order (paired).
type pointValues struct {
	score  float64
	trials []float64
	rounds []int
}

// comparePoint decides between a and b at one point: paired over their
// rounds with the stage's prior where both are paired, else a U test over
// the trials (rounds lost to a budget cut).
func comparePoint(a, b pointValues, prior search.Prior) search.Comparison {
	if a.rounds != nil && b.rounds != nil {
		return search.Paired(search.LogRatios(a.trials, b.trials, true), prior)
	}
	return search.Compare(a.trials, b.trials, true)
}

// pointPrior is the per-round log-ratios of every candidate against ref
// at every paired point: the stage's noise, by size.
func pointPrior(values map[string]map[point]pointValues, ref string, common []point) search.Priors {
	var sets search.Priors
	for name, vs := range values {
		if name == ref {
			continue
		}
		for _, pt := range common {
			if a, b := values[ref][pt], vs[pt]; a.rounds != nil && b.rounds != nil {
				sets = append(sets, search.SizedRounds{Size: pt.size, D: search.LogRatios(a.trials, b.trials, true)})
			}
		}
	}
	return sets
}

// minPairedRounds is how many rounds every candidate must share at a point
// for stageValues to compare them round by round.
const minPairedRounds = 2

// stageValues puts the candidates of a stage on one footing per point.
// Where every candidate ran the point in the same rounds (at least
// minPairedRounds), each round's values are divided by that round's
// geometric mean over the candidates, and a candidate's score is the
// median of its normalised values: the rounds interleave the candidates,
// so a slow spell of the machine that spans a round scales them all and
// cancels, where it would move one candidate's pooled median and not
// another's. Elsewhere (rounds lost to a budget cut) the score is the
// median of the pooled repetitions and the trials are the trials'
// medians. Either way the ratio of two scores at a point is what it
// claims to be, so geometric means over points rank candidates alike.
func stageValues(trials []Trial, stage string, cands []candidate, samples, perTrial map[string]map[point][]float64, common []point) map[string]map[point]pointValues {
	var names []string
	for _, c := range cands {
		if _, ok := samples[c.name]; ok {
			names = append(names, c.name)
		}
	}
	byRound := map[string]map[point]map[int]float64{}
	for _, name := range names {
		byRound[name] = map[point]map[int]float64{}
		perPattern := map[bench.Pattern]map[int]map[int]float64{}
		for _, pt := range common {
			if perPattern[pt.pattern] == nil {
				perPattern[pt.pattern] = roundMedians(trials, stage, name, pt.pattern)
			}
			byRound[name][pt] = perPattern[pt.pattern][pt.size]
		}
	}
	orient := func(pt point, v float64) float64 {
		if pt.pattern.HigherIsBetter() {
			return v
		}
		return 1 / v
	}
	out := map[string]map[point]pointValues{}
	for _, name := range names {
		out[name] = map[point]pointValues{}
	}
	for _, pt := range common {
		var shared []int
		for round, v := range byRound[names[0]][pt] {
			ok := v > 0
			for _, name := range names[1:] {
				w, found := byRound[name][pt][round]
				ok = ok && found && w > 0
			}
			if ok {
				shared = append(shared, round)
			}
		}
		sort.Ints(shared)
		if len(shared) < minPairedRounds {
			for _, name := range names {
				var tv []float64
				for _, v := range perTrial[name][pt] {
					tv = append(tv, orient(pt, v))
				}
				out[name][pt] = pointValues{score: orient(pt, search.Median(samples[name][pt])), trials: tv}
			}
			continue
		}
		norm := map[string][]float64{}
		for _, round := range shared {
			logRef := 0.0
			for _, name := range names {
				logRef += math.Log(orient(pt, byRound[name][pt][round]))
			}
			ref := math.Exp(logRef / float64(len(names)))
			for _, name := range names {
				norm[name] = append(norm[name], orient(pt, byRound[name][pt][round])/ref)
			}
		}
		for _, name := range names {
			out[name][pt] = pointValues{score: search.Median(norm[name]), trials: norm[name], rounds: shared}
		}
	}
	return out
}

func failedIn(trials []Trial, stage, cand string) bool { return failedWhy(trials, stage, cand) != "" }

// SizeVerdict is the transport stage's finding at one size.
type SizeVerdict struct {
	Size    int
	Medians map[string]float64
	Winner  string
	Versus  search.Comparison // the winner against the incumbent (sm), or sm against its closest challenger
	Settled bool
	// Leaned is set where an unsettled comparison decided at the last look
	// (search.Comparison.Lean): the winner is believed to lead by more than
	// the noise, without a settled test.
	Leaned bool
	// Mended is set where the verification of the emitted profile found a
	// single transport faster here, settled, and the size went to it.
	Mended bool
}

// transportWinners compares the transport candidates size by size, round
// by round: sm (cands[0]) is the incumbent, and each challenger in turn
// faces the winner so far with a paired test on their per-round ratios,
// the noise pooled over the stage's comparisons at nearby sizes. A challenger
// takes a size only where it wins. A size with an unsettled comparison is
// reported so; at the last look (final) such a comparison leans to the
// side the rounds make likely to lead by more than the noise.
func transportWinners(trials []Trial, stage string, cands []candidate, final bool) []SizeVerdict {
	byRound := map[string]map[int]map[int]float64{} // candidate → size → round → median
	var sizes []int
	for _, c := range cands {
		m := roundMedians(trials, stage, c.name, bench.Bandwidth)
		if len(m) == 0 || failedIn(trials, stage, c.name) {
			continue
		}
		byRound[c.name] = m
		for n := range m {
			if !slices.Contains(sizes, n) {
				sizes = append(sizes, n)
			}
		}
	}
	sort.Ints(sizes)
	ratios := func(a, b string, n int) []float64 { return roundRatios(byRound[a][n], byRound[b][n]) }
	// The prior: every challenger against the incumbent at every size.
	var prior search.Priors
	for _, n := range sizes {
		for _, c := range cands[1:] {
			prior = append(prior, search.SizedRounds{Size: n, D: ratios(cands[0].name, c.name, n)})
		}
	}
	var out []SizeVerdict
	for _, n := range sizes {
		v := SizeVerdict{Size: n, Medians: map[string]float64{}, Settled: true}
		for _, c := range cands {
			rounds := byRound[c.name][n]
			if len(rounds) == 0 {
				continue
			}
			v.Medians[c.name] = search.Median(slices.Collect(maps.Values(rounds)))
			if v.Winner == "" {
				v.Winner = c.name
				continue
			}
			cmp := search.Paired(ratios(v.Winner, c.name, n), prior.At(n))
			outcome := cmp.Outcome
			if outcome == search.Unsettled {
				v.Settled = false
				if final {
					outcome = cmp.Lean()
					v.Leaned = v.Leaned || outcome != search.Unsettled
				}
			}
			if outcome == search.BWins {
				v.Winner = c.name
			}
		}
		// What the summary shows: the winner against the incumbent, or,
		// where the incumbent kept the size, its closest challenger.
		if other := closest(v, cands[0].name); other != "" {
			a, b := cands[0].name, other
			if v.Winner != a {
				b = v.Winner
			}
			v.Versus = search.Paired(ratios(a, b, n), prior.At(n))
		}
		out = append(out, v)
	}
	return out
}

// closest is the candidate other than incumbent with the highest median
// at v's size ("" if none).
func closest(v SizeVerdict, incumbent string) string {
	best, name := 0.0, ""
	for _, c := range slices.Sorted(maps.Keys(v.Medians)) {
		if c != incumbent && v.Medians[c] > best {
			best, name = v.Medians[c], c
		}
	}
	return name
}

// alignRounds lists the values of the rounds a and b both have, in round
// order, side by side.
func alignRounds(a, b map[int]float64) (as, bs []float64) {
	for _, round := range slices.Sorted(maps.Keys(a)) {
		if w, ok := b[round]; ok {
			as, bs = append(as, a[round]), append(bs, w)
		}
	}
	return as, bs
}

// roundRatios are b's per-round log-ratios to a over the rounds both have
// (bandwidth: positive where b is faster).
func roundRatios(a, b map[int]float64) []float64 {
	as, bs := alignRounds(a, b)
	return search.LogRatios(as, bs, true)
}

// Range is a size range's route (profile.Range, before emission).
type Range struct {
	Min       int
	Transport string
	Protocol  string
	Mode      string // a rendezvous range's copy direction ("": the transport's default)
}

// rangesFrom turns per-size winners into size ranges: eager up to the eager
// limit, then each measured size's winner; a boundary between two measured
// sizes lies halfway between them. A single-copy range copies in the
// direction its sizes' winner does (cma pull or push), so a transport whose
// direction changes along the ladder gets a range for each.
func rangesFrom(eager int, verdicts []SizeVerdict, driverOf map[string]string) []Range {
	ranges := []Range{{Min: 0, Transport: "sm", Protocol: "eager"}}
	route := func(cand string) Range {
		if d := driverOf[cand]; singleCopy(d) {
			return Range{Transport: d, Protocol: "rendezvous", Mode: copyMode(cand)}
		}
		return Range{Transport: "sm", Protocol: "pipeline"}
	}
	prevSize := eager
	for _, v := range verdicts {
		if v.Size <= eager {
			continue
		}
		next := route(v.Winner)
		last := &ranges[len(ranges)-1]
		if last.Protocol == "eager" {
			next.Min = eager + 1
			ranges = append(ranges, next)
		} else if last.Transport != next.Transport || last.Mode != next.Mode {
			next.Min = max(prevSize+1, (prevSize+v.Size+1)/2)
			ranges = append(ranges, next)
		}
		prevSize = v.Size
	}
	if len(ranges) == 1 { // nothing measured above the eager limit
		ranges = append(ranges, Range{Min: eager + 1, Transport: "sm", Protocol: "pipeline"})
	}
	return ranges
}

// copyMode is the copy direction a transport candidate of the plan sets
// ("" for none: sm, or a name the plan does not know).
func copyMode(name string) string {
	tc, ok := transportCandidates[name]
	if !ok {
		return ""
	}
	return tc.opts[tc.driver+".mode"]
}

// footprint describes the shared memory a channel geometry implies.
func footprint(p SMParams, ranks []int) string {
	q := p.channels()
	s := fmt.Sprintf("%s per ordered pair, %s per rank", bytesize.Human(int64(q.PairBytes())), bytesize.Human(int64(q.RingBytes())))
	for _, n := range ranks {
		s += fmt.Sprintf("; %d ranks: %s", n, bytesize.Human(nodeBytes(p, n)))
	}
	return s
}

// channels is the sm geometry of p.
func (p SMParams) channels() sm.Params {
	return sm.Params{Depth: p.Depth, DepthRanks: p.DepthRanks, CellSize: p.Cell, FragSize: p.Frag, FragSlots: p.Slots}
}

// nodeBytes is the shared memory of sm's channels with ranks ranks on a
// node: a cell FIFO per ordered pair, a fragment ring per rank.
func nodeBytes(p SMParams, ranks int) int64 { return int64(p.channels().SegmentBytes(ranks)) }

// memoryShare: channel parameters are affordable on a node when, with one
// rank per core, their channels take at most 1/memoryShare of its memory.
const memoryShare = 100

// affordable says whether channels of p are affordable with one rank on
// each of cores cores and mem bytes of memory; false when either is
// unknown.
func affordable(p SMParams, cores int, mem int64) bool {
	if cores < 1 || mem <= 0 {
		return false
	}
	return nodeBytes(p, cores) <= mem/memoryShare
}

// preferReference holds d's choice to a stricter rule when the reference
// is affordable: a smaller footprint buys nothing then, so a choice other
// than the reference stands only if it scores above the reference by more
// than search.Noise. Otherwise the reference is chosen. d is unchanged
// when the reference was dropped or is already chosen.
func preferReference(d StageDecision, ref string) (StageDecision, bool) {
	var chosen, reference *Score
	for i := range d.Scores {
		switch d.Scores[i].Candidate {
		case d.Chosen:
			chosen = &d.Scores[i]
		case ref:
			reference = &d.Scores[i]
		}
	}
	if d.Chosen == ref || chosen == nil || reference == nil || reference.Dropped != "" ||
		chosen.Value > reference.Value*(1+search.Noise) {
		return d, false
	}
	d.Scores = append([]Score(nil), d.Scores...)
	for i := range d.Scores {
		d.Scores[i].Chosen = d.Scores[i].Candidate == ref
	}
	d.Chosen = ref
	return d, true
}

func itoa(n int) string { return strconv.Itoa(n) }

func logRatio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return math.Log(a / b)
}

func expMean(logSum float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return math.Exp(logSum / float64(n))
}
