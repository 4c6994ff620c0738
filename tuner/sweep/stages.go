package sweep

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/bytesize"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/hostmem"
	"github.com/gotune/gotune/transports/sm"
	"github.com/gotune/gotune/tuner/probe"
	"github.com/gotune/gotune/tuner/search"
)

// Stage names, as stored in trials.
const (
	stageEager     = "eager"
	stageFragment  = "fragment"
	stageDepth     = "depth"
	stageConfirm   = "confirm"
	stagePark      = "park"
	stageTransport = "transport"
	stageAllocPol  = "alloc"
	stageAllocSize = "alloc-cache"
	stageVerify    = "verify"
)

// Outcome is everything a sweep decided, before the safety phase.
type Outcome struct {
	Stages     []StageDecision
	Transport  []SizeVerdict
	Ranges     []Range
	SM         SMParams
	Alloc      AllocParams
	Candidates []candidate // the transport stage's
	Footprint  string
	GPU        *GPUParams       // nil without GPU stages
	Internode  *InternodeParams // nil on one node
	Stacks     []StackOutcome
}

// SMParams are the decided channel parameters.
type SMParams struct {
	Eager, Cell, Frag, Slots, Depth int
	Progress                        string
	// Park is sm.park as the option spells it ("50us"); empty: the
	// built-in, which the park stage leaves when it does not run.
	Park string
	// DepthRanks is the ranks per node Depth serves, set once the stages
	// have decided (sm.Params.DepthRanks); 0 while they weigh candidates.
	DepthRanks int
}

// AllocParams are the decided host allocator settings.
type AllocParams struct {
	Purge string
	THP   bool
	Cache int64
}

// options renders the allocator settings as alloc.* options.
func (a AllocParams) options() transports.Options {
	return transports.Options{hostmem.KeyPurge: a.Purge, hostmem.KeyTHP: onOff(a.THP), hostmem.KeyCache: transports.FormatSize(int(a.Cache))}
}

// cacheOptions is options as the cache stage has always keyed its trials:
// the cache size in plain bytes.
func (a AllocParams) cacheOptions() transports.Options {
	o := a.options()
	o[hostmem.KeyCache] = itoa(int(a.Cache))
	return o
}

// options renders the channel parameters as sm.* options.
func (p SMParams) options() transports.Options {
	o := transports.Options{sm.KeyEager: itoa(p.Eager), sm.KeyCell: itoa(p.Cell), sm.KeyFrag: itoa(p.Frag),
		sm.KeyFrags: itoa(p.Slots), sm.KeyDepth: itoa(p.Depth)}
	if p.Progress != "" && p.Progress != "poll" {
		o[sm.KeyProgress] = p.Progress
	}
	if p.Park != "" {
		o[sm.KeyPark] = p.Park
	}
	return o
}

// cellFor is the transport's built-in cell for an eager limit (the stages'
// parameters are named sm, which hides the package).
func cellFor(eager int) int { return sm.CellFor(eager) }

// affordableBuiltin is the built-in parameters with the largest fragment
// ring, of the built-in fragment size where it can be, that fits the node
// (fits): slots halved down to minSlots, then fragments halved down to
// minFrag. A reference the node cannot run at its rank count is no
// reference.
func affordableBuiltin(fits func(SMParams) bool) SMParams {
	p := defaultSM()
	for !fits(p) {
		switch {
		case p.Slots > minSlots:
			p.Slots /= 2
		case p.Frag > minFrag:
			p.Frag /= 2
		default:
			return p
		}
	}
	return p
}

// minSlots and minFrag bound how far affordableBuiltin shrinks the ring.
const (
	minSlots = 2
	minFrag  = 4 << 10
)

// defaultSM is where the stages start: the transport's own defaults.
func defaultSM() SMParams {
	d := sm.DefaultParams()
	return SMParams{Eager: d.EagerLimit, Cell: d.CellSize, Frag: d.FragSize, Slots: d.FragSlots, Depth: d.Depth, Progress: d.Progress}
}

// measure runs rounds of every candidate over sizes with each pattern,
// interleaved; the first round is required, later ones optional (budget).
func (r *Runner) measure(stage string, cands []candidate, patterns []bench.Pattern, sizes []int, rounds int) error {
	return r.measureOn(stage, cands, patterns, sizes, rounds, nil)
}

// measureOn is measure with GPU buffers and load (tg; nil: host buffers).
// A GPU candidate out of the stage (it stalled or failed) is not measured
// again: each stalled trial costs the load kernel's bound per pass.
func (r *Runner) measureOn(stage string, cands []candidate, patterns []bench.Pattern, sizes []int, rounds int, tg *TrialGPU) error {
	return r.measureRounds(stage, cands, patterns, sizes, 1, rounds, 1, tg)
}

// measureRounds is measureOn for rounds first to last only; rounds up to
// required are not cut by the budget (its reserve counts them).
func (r *Runner) measureRounds(stage string, cands []candidate, patterns []bench.Pattern, sizes []int, first, last, required int, tg *TrialGPU) error {
	r.meterPlan(stage, (last-first+1)*len(cands)*len(patterns))
	for round := first; round <= last; round++ {
		for _, pattern := range patterns {
			var trials []Trial
			for _, c := range candidateOrder(cands, round) {
				if tg != nil && failedWhy(r.trials, stage, c.name) != "" {
					continue
				}
				trials = append(trials, r.stageTrial(stage, c, pattern, sizes, round, tg))
			}
			_, err := r.runTogether(trials, round > required)
			if errors.Is(err, ErrBudget) {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// stageTrial is candidate c's trial of stage: pattern over sizes in round,
// on GPU buffers and load tg (nil: host).
func (r *Runner) stageTrial(stage string, c candidate, pattern bench.Pattern, sizes []int, round int, tg *TrialGPU) Trial {
	return Trial{Stage: stage, Candidate: c.name, Transport: c.transport, Options: c.opts,
		Pattern: pattern, Sizes: sizes, Round: round, GPU: tg, Nodes: c.nodes, Ranks: r.ranksOf(pattern)}
}

// Patterns each stage is scored on.
var (
	eagerPatterns    = []bench.Pattern{bench.Latency, bench.Bandwidth}
	fragmentPatterns = []bench.Pattern{bench.Bandwidth}
	depthPatterns    = []bench.Pattern{bench.MsgRate, bench.Bandwidth} // bw: a shallow ring shows at 512 B-1 KiB
	// At the node's ranks (geometryRanks), the fragment stage also weighs
	// N/2 pairs streaming at once, whose rings share the caches and the
	// memory; the depth stage every rank sending to every other, which
	// uses every pair's FIFO.
	fragmentNodePattern = bench.MultiBandwidth
	depthNodePattern    = bench.AllToAll
	confirmPatterns     = []bench.Pattern{bench.Bandwidth}
	parkPatterns        = []bench.Pattern{bench.AllToAll}
	transportPatterns   = []bench.Pattern{bench.Bandwidth}
	allocPatterns       = []bench.Pattern{allocPattern}
)

// eagerCandidates, fragmentCandidates, ... build each stage's candidates
// on top of the parameters decided so far.
func eagerCandidates(p Plan, sm SMParams) []candidate {
	var out []candidate
	for _, e := range p.Eager {
		q := sm
		q.Eager, q.Cell = int(e), cellFor(int(e))
		out = append(out, candidate{name: "eager=" + e.String(), transport: "sm", opts: q.options(), cost: int64(q.Cell * q.Depth), sm: q})
	}
	return out
}

func fragmentCandidates(p Plan, sm SMParams) []candidate {
	var out []candidate
	for _, f := range p.Fragments {
		q := sm
		q.Frag, q.Slots = f.Size, f.Slots
		out = append(out, candidate{name: "frag=" + f.String(), transport: "sm", opts: q.options(), cost: int64(f.Size * f.Slots), sm: q})
	}
	return out
}

// withSize adds n to an ascending size list unless it is there already.
// The depth stage measures at the eager limit the eager stage chose: a
// shallow FIFO costs most with the largest messages that travel inline.
func withSize(sizes []int, n int) []int {
	i, found := slices.BinarySearch(sizes, n)
	if found || n <= 0 {
		return sizes
	}
	return slices.Insert(slices.Clone(sizes), i, n)
}

// fragmentSizes are the sizes the fragment stage weighs: the plan's, and
// the smallest pipelined message, twice the eager limit. Why: a window of
// messages below the fragment size takes a slot each, so the slots bound
// it there most (8 KiB at 0.82x with 16 slots against 64 where the plan's
// sizes began at 16 KiB: docs/tuner.md, Footprint).
func fragmentSizes(p Plan, sm SMParams) []int { return withSize(p.FragmentSizes.Sizes(), 2*sm.Eager) }

// fragmentSizes is fragmentSizes, except for a run stored before the stage
// weighed twice the eager limit: that one re-decides on the plan's sizes,
// which it measured (its first trial is stored over them).
func (r *Runner) fragmentSizes(cands []candidate, patterns []bench.Pattern, sm SMParams) []int {
	planned := r.plan.FragmentSizes.Sizes()
	if len(cands) > 0 && len(patterns) > 0 {
		if r.store.Has(r.stageTrial(stageFragment, cands[0], patterns[0], planned, 1, nil).key()) {
			return planned
		}
	}
	return fragmentSizes(r.plan, sm)
}

func depthCandidates(p Plan, sm SMParams) []candidate {
	var out []candidate
	for _, d := range p.Depths {
		q := sm
		q.Depth = d
		out = append(out, candidate{name: "depth=" + itoa(d), transport: "sm", opts: q.options(), cost: int64(d * q.Cell), sm: q})
	}
	return out
}

// parkCandidates are the plan's parking delays; shorter costs less, since
// a sender blocked on a full ring waits up to the delay (hazard H5).
func parkCandidates(p Plan, sm SMParams) []candidate {
	var out []candidate
	for _, d := range p.Parks {
		q := sm
		q.Park = transports.FormatDuration(d)
		out = append(out, candidate{name: "park=" + q.Park, transport: "sm", opts: q.options(), cost: int64(d), sm: q})
	}
	return out
}

func transportCands(p Plan, sm SMParams) []candidate {
	var out []candidate
	for i, name := range p.Transports {
		tc := transportCandidates[name]
		o := sm.options().With(tc.opts)
		if singleCopy(tc.driver) {
			o[tc.driver+".threshold"] = itoa(sm.Eager + 1)
		}
		out = append(out, candidate{name: name, transport: tc.driver, opts: o, cost: int64(i), sm: sm})
	}
	return out
}

func purgeCost(p string) int64 { return map[string]int64{"immediate": 0, "delayed": 1, "never": 2}[p] }

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func allocPolicyCandidates(p Plan, sm SMParams) []candidate {
	var out []candidate
	for _, pu := range p.AllocPurges {
		for _, thp := range p.AllocTHP {
			a := AllocParams{Purge: pu, THP: thp, Cache: 64 << 20}
			cost := purgeCost(pu) * 2
			if thp {
				cost++
			}
			out = append(out, candidate{name: "purge=" + pu + ",thp=" + onOff(thp), transport: "sm", opts: sm.options().With(a.options()), cost: cost, sm: sm, alloc: a})
		}
	}
	return out
}

func allocCacheCandidates(p Plan, sm SMParams, a AllocParams) []candidate {
	var out []candidate
	for _, c := range p.AllocCaches {
		q := a
		q.Cache = int64(c)
		out = append(out, candidate{name: "cache=" + c.String(), transport: "sm", opts: sm.options().With(q.cacheOptions()), cost: int64(c), sm: sm, alloc: q})
	}
	return out
}

// allocPattern is bench's allocate-per-message pattern, when it exists.
var allocPattern = bench.Pattern("alloc")

// decide runs (or replays) every measuring stage and decides. With measure
// false it only replays what is stored: `gotune tune`.
func (r *Runner) decide() (Outcome, error) {
	p := r.plan
	var out Outcome
	sm := defaultSM()
	// Progress mode first: every stage measures the mode it will emit.
	mode, err := r.progressMode(sm)
	if err != nil {
		return out, err
	}
	sm.Progress = mode

	// Eager limit: latency around the candidate limits.
	cands := eagerCandidates(p, sm)
	if err := r.measure(stageEager, cands, eagerPatterns, p.EagerSizes.Sizes(), p.Rounds); err != nil {
		return out, err
	}
	d := pickWhereTheyDiffer(r.trials, stageEager, eagerPatterns, cands, sameProtocol)
	out.Stages = append(out.Stages, d)
	if c := find(cands, d.Chosen); c != nil {
		sm = c.sm
	}

	// Fragment geometry: bandwidth of pipelined sizes.
	cands = r.withinCeiling(stageFragment, fragmentCandidates(p, sm))
	patterns := atNode(fragmentPatterns, fragmentNodePattern, r.geometryRanks())
	if err := r.measure(stageFragment, cands, patterns, r.fragmentSizes(cands, patterns, sm), p.Rounds); err != nil {
		return out, err
	}
	d = pickCheapest(r.trials, stageFragment, patterns, cands)
	out.Stages = append(out.Stages, d)
	if c := find(cands, d.Chosen); c != nil {
		sm = c.sm
	}

	// FIFO depth: message rate of small messages, bandwidth of the
	// largest inline one and of pipelined ones (each fragment takes a
	// cell too, so a window of the smallest pipelined messages, twice the
	// eager limit, needs as many cells as an eager window).
	depthSizes := withSize(withSize(p.DepthSizes.Sizes(), sm.Eager), 2*sm.Eager)
	cands = r.withinCeiling(stageDepth, depthCandidates(p, sm))
	patterns = atNode(depthPatterns, depthNodePattern, r.geometryRanks())
	if err := r.measure(stageDepth, cands, patterns, depthSizes, p.Rounds); err != nil {
		return out, err
	}
	d = pickCheapest(r.trials, stageDepth, patterns, cands)
	out.Stages = append(out.Stages, d)
	if c := find(cands, d.Chosen); c != nil {
		sm = c.sm
	}

	// Confirmation: the choices together against the built-in ones.
	if d, ok, err := r.confirmStage(&sm); err != nil {
		return out, err
	} else if ok {
		out.Stages = append(out.Stages, d)
	}

	// Parking delay, at the node's ranks only: alltoall, whose next steps'
	// messages an idle rank would park (a second copy each) before their
	// receives come. The shortest delay that loses nowhere.
	if r.geometryRanks() > 0 && len(p.Parks) > 0 { // 0: a pair, where nothing waits to be parked
		cands = parkCandidates(p, sm)
		if err := r.measure(stagePark, cands, parkPatterns, p.ParkSizes.Sizes(), p.Rounds); err != nil {
			return out, err
		}
		d = pickCheapest(r.trials, stagePark, parkPatterns, cands)
		out.Stages = append(out.Stages, d)
		if c := find(cands, d.Chosen); c != nil {
			sm = c.sm
		}
	}

	// The depth is decided for the ranks per node the profile serves; a
	// job of fewer ranks takes the built-in depth where that is deeper.
	if n := r.ranksPerNode(); n > 2 {
		sm.DepthRanks = n
	}

	// Transport per size: coarse ladder, settle, bisect crossovers.
	if err := r.transportStage(sm, &out); err != nil {
		return out, err
	}

	// Host allocator (allocate-per-message pattern).
	out.Alloc = AllocParams{Purge: "immediate", Cache: 64 << 20}
	if _, err := bench.ParsePattern(string(allocPattern)); err == nil && len(p.AllocPurges) > 0 {
		allocSizes := p.AllocSizes.Sizes()
		cands = allocPolicyCandidates(p, sm)
		if err := r.measure(stageAllocPol, cands, allocPatterns, allocSizes, p.Rounds); err != nil {
			return out, err
		}
		d = pickCheapest(r.trials, stageAllocPol, allocPatterns, cands)
		out.Stages = append(out.Stages, d)
		if c := find(cands, d.Chosen); c != nil {
			out.Alloc.Purge, out.Alloc.THP = c.alloc.Purge, c.alloc.THP
		}
		cands = allocCacheCandidates(p, sm, out.Alloc)
		if err := r.measure(stageAllocSize, cands, allocPatterns, allocSizes, p.Rounds); err != nil {
			return out, err
		}
		d = pickCheapest(r.trials, stageAllocSize, allocPatterns, cands)
		out.Stages = append(out.Stages, d)
		if c := find(cands, d.Chosen); c != nil {
			out.Alloc.Cache = c.alloc.Cache
		}
	} else {
		r.notes = append(r.notes, "allocator: this build has no alloc pattern; defaults stand")
	}
	out.SM = sm
	out.Footprint = footprint(sm, r.footprintRanks())
	if err := r.internodeStages(&out); err != nil {
		return out, err
	}
	if err := r.gpuStages(sm, &out); err != nil {
		return out, err
	}
	return out, nil
}

// confirmCandidates are the stages' choices ("chosen"), the same with the
// built-in FIFO depth, and the built-in parameters (with the progress mode
// the stages measured), cheapest first: a choice stands unless it loses.
// The reference is the built-in parameters as the node affords them
// (affordableBuiltin; "built-in,frag=..." where the ring had to shrink):
// a low eager limit or a small ring chosen on noise still faces them.
// Its depth is what a job of ranks ranks takes without a profile
// (sm.DepthFor).
func confirmCandidates(chosen SMParams, fits func(SMParams) bool, ranks int) []candidate {
	builtin := affordableBuiltin(fits)
	builtin.Progress = chosen.Progress
	builtin.Depth = sm.DepthFor(ranks)
	refName := "built-in"
	if d := defaultSM(); builtin.Frag != d.Frag || builtin.Slots != d.Slots {
		refName = fmt.Sprintf("built-in,frag=%sx%d", transports.FormatSize(builtin.Frag), builtin.Slots)
	}
	withDepth := chosen
	withDepth.Depth = builtin.Depth
	out := []candidate{{name: "chosen", transport: "sm", opts: chosen.options(), cost: 0, sm: chosen}}
	if withDepth != chosen {
		out = append(out, candidate{name: "chosen,depth=" + itoa(builtin.Depth), transport: "sm", opts: withDepth.options(), cost: 1, sm: withDepth})
	}
	if builtin != chosen && builtin != withDepth {
		out = append(out, candidate{name: refName, transport: "sm", opts: builtin.options(), cost: 2, sm: builtin})
	}
	return out
}

// confirmStage weighs the channel parameters the stages chose, together,
// against the same with the built-in FIFO depth and against the built-in
// parameters, over the confirmation sizes, for MaxRound rounds: each stage
// keeps the cheapest candidate its few rounds cannot tell from the best,
// and choices made stage by stage were never measured together.
//
// The first candidate within search.Noise of the last (the built-in
// parameters, or the nearest to them) that the last beats at no point
// stands. The built-in parameters are the reference, not the best scorer:
// over 25 sizes a settled U test at one of them is as often chance as not.
// ok is false when there is nothing to confirm (no sizes, or the choices
// are the built-in ones). Why each rule: docs/tuner.md, Decision rules
// (Confirmation).
func (r *Runner) confirmStage(sm *SMParams) (StageDecision, bool, error) {
	confirmSizes := r.plan.ConfirmSizes.Sizes()
	cands := r.withinCeiling(stageConfirm, confirmCandidates(*sm, r.fits, r.ranksPerNode()))
	if len(confirmSizes) == 0 || len(cands) < 2 {
		return StageDecision{}, false, nil
	}
	if err := r.measure(stageConfirm, cands, confirmPatterns, confirmSizes, r.plan.MaxRound); err != nil {
		return StageDecision{}, false, err
	}
	ref := cands[len(cands)-1].name
	d := pickAgainst(r.trials, stageConfirm, confirmPatterns, cands, ref)
	// A choice that trails the reference by more than the noise at some
	// size, unsettled, gets more rounds there until the test settles
	// (either way) or confirmTrailRounds are spent: MaxRound rounds can
	// leave a real loss of a few per cent unsettled.
	for round := r.plan.MaxRound + 1; round <= r.plan.MaxRound+confirmTrailRounds; round++ {
		trails := chosenTrails(d)
		if len(trails) == 0 {
			break
		}
		stake := stakeOf(r.trials, stageConfirm, d.Chosen, ref, trails, false)
		if err := r.measureRound(stageConfirm, cands, trails, round, stake); err != nil {
			if errors.Is(err, ErrBudget) {
				break
			}
			return d, true, err
		}
		d = pickAgainst(r.trials, stageConfirm, confirmPatterns, cands, ref)
	}
	// Where the reference's channels are affordable at the ranks per node
	// the profile serves, a choice that saved memory within the noise is
	// no bargain.
	refSM := cands[len(cands)-1].sm
	prov := r.meta.Provenance
	if ranks := r.ranksPerNode(); affordable(refSM, ranks, prov.MemBytes) {
		var held bool
		if d, held = preferReference(d, ref); held {
			r.notes = append(r.notes, fmt.Sprintf("confirm: %s kept: its channels take %s with %d ranks per node, within 1/%d of %s of memory, so a choice must beat it by more than %.0f%% to stand",
				ref, bytesize.Human(nodeBytes(refSM, ranks)), ranks, memoryShare, bytesize.Human(prov.MemBytes), 100*search.Noise))
		}
	}
	if c := find(cands, d.Chosen); c != nil {
		*sm = c.sm
	}
	return d, true, nil
}

// ranksPerNode is the ranks per node the profile serves: the plan's, or
// one per core of this node (at least 2).
func (r *Runner) ranksPerNode() int {
	if r.plan.RanksPerNode > 0 {
		return r.plan.RanksPerNode
	}
	return max(r.meta.Provenance.Cores, 2)
}

// geometryRanks is the rank count the geometry stages also weigh their
// candidates at: what the run's store holds (so that a resume or a
// replay on another machine decides on what was measured), else, when
// measuring, the plan's geometry_ranks or the ranks per node at most the
// cpuset's cores, made even; 0 below 4, where a pair is what the stages
// measure anyway.
func (r *Runner) geometryRanks() int {
	if r.geometry != nil {
		return *r.geometry
	}
	n := r.storedGeometryRanks()
	switch {
	case n > 0 || r.replayOnly:
	case r.plan.GeometryRanks > 0:
		n = r.plan.GeometryRanks
	default:
		n = r.ranksPerNode()
		if cores, err := bench.NodeRanks(bench.MultiBandwidth); err == nil {
			n = min(n, cores)
		}
		if n -= n % 2; n < 4 {
			n = 0
		}
	}
	r.geometry = &n
	return n
}

// storedGeometryRanks is the rank count of the geometry stages' stored
// multi-rank trials, 0 when there are none.
func (r *Runner) storedGeometryRanks() int {
	if r.store == nil {
		return 0
	}
	for _, rec := range r.store.Records() {
		if rec.Kind != "trial" {
			continue
		}
		var t Trial
		if json.Unmarshal(rec.Data, &t) == nil && (t.Stage == stageFragment || t.Stage == stageDepth) && t.Ranks > 0 {
			return t.Ranks
		}
	}
	return 0
}

// ranksOf is the rank count a trial of pattern runs at: the geometry
// ranks for a multi-rank pattern, 0 (a pair) for the others.
func (r *Runner) ranksOf(p bench.Pattern) int {
	if p.MultiRank() {
		return r.geometryRanks()
	}
	return 0
}

// atNode is patterns with node added when ranks is not 0.
func atNode(patterns []bench.Pattern, node bench.Pattern, ranks int) []bench.Pattern {
	if ranks == 0 {
		return patterns
	}
	return append(slices.Clone(patterns), node)
}

// footprintRanks are the rank counts the footprint is reported at: the
// ranks per node the profile serves first, then the plan's others.
func (r *Runner) footprintRanks() []int {
	ranks := []int{r.ranksPerNode()}
	for _, n := range r.plan.FootprintRanks {
		if !slices.Contains(ranks, n) {
			ranks = append(ranks, n)
		}
	}
	return ranks
}

// fits says whether channels of p, with the ranks per node the profile
// serves, take at most 1/memoryShare of the node's memory (true when the
// memory is unknown).
func (r *Runner) fits(p SMParams) bool {
	mem := r.meta.Provenance.MemBytes
	return mem <= 0 || affordable(p, r.ranksPerNode(), mem)
}

// withinCeiling keeps the candidates whose channels, with the ranks per
// node the profile serves, take at most 1/memoryShare of the node's
// memory (all of them when the memory is unknown, the cheapest when none
// fits); the others are named in a note and not measured: a geometry the
// node cannot afford at its rank count is no answer, however fast for a
// pair.
func (r *Runner) withinCeiling(stage string, cands []candidate) []candidate {
	ranks, mem := r.ranksPerNode(), r.meta.Provenance.MemBytes
	var keep, over []candidate
	for _, c := range cands {
		if r.fits(c.sm) {
			keep = append(keep, c)
		} else {
			over = append(over, c)
		}
	}
	if len(over) == 0 {
		return cands
	}
	if len(keep) == 0 {
		cheapest := slices.MinFunc(cands, func(a, b candidate) int { return int(a.cost - b.cost) })
		keep, over = []candidate{cheapest}, slices.DeleteFunc(over, func(c candidate) bool { return c.name == cheapest.name })
	}
	var names []string
	for _, c := range over {
		names = append(names, fmt.Sprintf("%s (%s)", c.name, bytesize.Human(nodeBytes(c.sm, ranks))))
	}
	r.notes = append(r.notes, fmt.Sprintf("%s: not weighed, over 1/%d of %s of memory with %d ranks per node: %s",
		stage, memoryShare, bytesize.Human(mem), ranks, strings.Join(names, ", ")))
	return keep
}

// confirmTrailRounds is how many rounds beyond MaxRound the confirmation
// may add at the sizes where its choice trails the reference.
const confirmTrailRounds = 12

// chosenTrails is where d's choice, if it is not the reference, trails the
// reference unsettled.
func chosenTrails(d StageDecision) []int {
	for _, sc := range d.Scores {
		if sc.Chosen && sc.Candidate != d.Reference {
			return sc.Trails
		}
	}
	return nil
}

func find(cands []candidate, name string) *candidate {
	for i := range cands {
		if cands[i].name == name {
			return &cands[i]
		}
	}
	return nil
}

// transportStage weighs the single transports size by size: the coarse
// ladder for Rounds rounds; sizes whose comparison is unsettled get more
// rounds (up to MaxRound); neighbouring sizes with different winners get
// the size between them, until every crossover is known to a doubling.
func (r *Runner) transportStage(sm SMParams, out *Outcome) error {
	p := r.plan
	cands, err := r.presentOnly(transportCands(p, sm))
	if err != nil {
		return err
	}
	out.Candidates = cands
	coarse := p.TransportSizes.Every(p.LadderStep)
	// Every round of the plan is required here: a transport gap is the
	// largest loss a wrong decision makes, and one round cannot settle it,
	// so sm would keep every size by construction.
	if err := r.measureRounds(stageTransport, cands, transportPatterns, coarse, 1, p.Rounds, p.Rounds, nil); err != nil {
		return err
	}
	driverOf := driversOf(cands)
	extraRound := map[int]int{} // size → rounds measured beyond the stage's own
	for pass := 0; pass < 16; pass++ {
		verdicts := transportWinners(r.trials, stageTransport, cands, false)
		var unsettled []int
		stake := 0.0
		for _, v := range verdicts {
			if !v.Settled && p.Rounds+extraRound[v.Size] < p.MaxRound {
				unsettled = append(unsettled, v.Size)
				stake = math.Max(stake, v.Versus.ExpectedLoss(v.Versus.Lean() == search.BWins))
			}
		}
		var mids []int
		if p.Bisect {
			var measured []int
			winner := map[int]string{} // by driver: cma pull or push route alike
			for _, v := range verdicts {
				measured = append(measured, v.Size)
				winner[v.Size] = driverOf[v.Winner]
			}
			mids = search.Bisect(measured, func(n int) string { return winner[n] })
		}
		if len(unsettled) == 0 && len(mids) == 0 {
			break
		}
		if len(unsettled) > 0 {
			round := p.Rounds + 1 + extraRound[unsettled[0]]
			for _, n := range unsettled {
				extraRound[n]++
			}
			if err := r.measureRound(stageTransport, cands, unsettled, round, stake); err != nil {
				if errors.Is(err, ErrBudget) {
					break
				}
				return err
			}
		}
		if len(mids) > 0 {
			stop := false
			for round := 1; round <= p.Rounds && !stop; round++ {
				if err := r.measureRound(stageTransport, cands, mids, round, math.Inf(1)); err != nil {
					if !errors.Is(err, ErrBudget) {
						return err
					}
					stop = true
				}
			}
			if stop {
				break
			}
		}
	}
	out.Transport = transportWinners(r.trials, stageTransport, cands, true)
	out.Ranges = rangesFrom(sm.Eager, out.Transport, driverOf)
	return nil
}

// driversOf maps each candidate's name to its driver (cma pull and push
// routes alike to cma).
func driversOf(cands []candidate) map[string]string {
	m := map[string]string{}
	for _, c := range cands {
		m[c.name] = c.transport
	}
	return m
}

// measureRound runs one optional round of every candidate at sizes, if
// its stake is worth the time (worthRound; +Inf: always, while the budget
// lasts); a round refused returns ErrBudget.
func (r *Runner) measureRound(stage string, cands []candidate, sizes []int, round int, stake float64) error {
	sizes = sortedSizes(sizes)
	if ok, err := r.worthRound(stage, cands, sizes, round, stake); err != nil || !ok {
		return cmp.Or(err, ErrBudget)
	}
	r.meterPlan(stage, len(cands))
	var trials []Trial
	for _, c := range candidateOrder(cands, round) {
		trials = append(trials, Trial{Stage: stage, Candidate: c.name, Transport: c.transport, Options: c.opts,
			Pattern: bench.Bandwidth, Sizes: sizes, Round: round})
	}
	_, err := r.runTogether(trials, true)
	return err
}

// progressMode probes H8 on polling progress: a hazard there means the
// profile needs the progress thread, so the stages measure with it.
func (r *Runner) progressMode(sm SMParams) (string, error) {
	if !slices.Contains(r.plan.Probes, "H8") {
		return "poll", nil
	}
	p, err := probe.Lookup("H8")
	if err != nil {
		return "poll", nil
	}
	v, _, err := r.probeOnce(p, false, sm.options())
	if err != nil {
		return "", err
	}
	if v.Outcome == probe.HazardDetected.String() {
		r.notes = append(r.notes, "progress: H8 caught polling progress starving a rendezvous ("+v.Detail+"); every stage measured sm.progress=thread")
		return "thread", nil
	}
	return "poll", nil
}
