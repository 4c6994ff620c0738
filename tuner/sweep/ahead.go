package sweep

import (
	"slices"
	"strings"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/tuner/probe"
)

// The budget holds back time for the work a sweep cannot skip: the first
// round of every stage still to come, the safety phase and the
// verification. That work is estimated from the plan and priced at the pace
// of this run's own trials, so that a loaded machine cuts optional rounds
// earlier instead of running past the budget with required ones.

// plannedTrial is a kind of trial the plan will run: count of them, each
// with pattern over sizes (GPU trials: at load).
type plannedTrial struct {
	stage   string
	count   int
	pattern bench.Pattern
	sizes   []int
	gpu     bool
	loaded  bool
}

// stageOrder is the order decide runs the stages in; GPU stages are named
// stage/LOAD and ordered by their prefix.
var stageOrder = []string{stageEager, stageFragment, stageDepth, stageConfirm, stagePark, stageTransport,
	stageAllocPol, stageAllocSize, stageInterTransport, stageInterEager, stageInterProtocol, stageInterQueue, stageGPUPath, stageGPUCopy, stageGPUDone, stageGPURelay, stageGPUCache, stageGPUPinned, stageVerify}

// stageIndex places stage in stageOrder (-1: before every stage).
func stageIndex(stage string) int {
	stage, _, _ = strings.Cut(stage, "/")
	return slices.Index(stageOrder, stage)
}

// requiredTrials lists the first rounds of the plan's stages, every round
// of the transport stage and an allowance for its extra work (stage
// "transport/extra" and "transport/bisect"), and every verification round
// (the reserve keeps them: optional rounds of stages give way to the check
// of what they decided, and to the decision with the most at stake).
// Counts follow the candidate builders with the built-in parameters; a
// stage that may skip itself (confirmation) is counted as measuring.
func requiredTrials(p Plan, nodes, geometryRanks int) []plannedTrial {
	sm := defaultSM()
	var out []plannedTrial
	add := func(stage string, cands int, patterns []bench.Pattern, sizes []int) {
		for _, pat := range patterns {
			if cands > 0 && len(sizes) > 0 {
				out = append(out, plannedTrial{stage: stage, count: cands, pattern: pat, sizes: sizes})
			}
		}
	}
	add(stageEager, len(eagerCandidates(p, sm)), eagerPatterns, p.EagerSizes.Sizes())
	add(stageFragment, len(fragmentCandidates(p, sm)), atNode(fragmentPatterns, fragmentNodePattern, geometryRanks), fragmentSizes(p, sm))
	add(stageDepth, len(depthCandidates(p, sm)), atNode(depthPatterns, depthNodePattern, geometryRanks), withSize(withSize(p.DepthSizes.Sizes(), sm.Eager), 2*sm.Eager))
	add(stageConfirm, 3, confirmPatterns, p.ConfirmSizes.Sizes())
	if geometryRanks > 0 {
		add(stagePark, len(p.Parks), parkPatterns, p.ParkSizes.Sizes())
	}
	coarse := p.TransportSizes.Every(p.LadderStep)
	add(stageTransport, len(p.Transports)*max(p.Rounds, 1), transportPatterns, coarse)
	// The transport stage's own extra work, bisection of two crossovers
	// and more rounds at three unsettled sizes, is optional, but the
	// geometry stages' extra rounds before it (a few per cent at stake, at
	// a node's rank count) must give way to it (tens of per cent): on a
	// 1 x H200 host they left it no round to bisect a crossover.
	add(stageTransport+"/extra", len(p.Transports)*transportExtraRounds(p), transportPatterns, middle(coarse, 3))
	if p.Bisect {
		add(stageTransport+"/bisect", len(p.Transports)*max(p.Rounds, 1), transportPatterns, middle(coarse, 2))
	}
	if len(p.AllocPurges) > 0 {
		add(stageAllocPol, len(allocPolicyCandidates(p, sm)), allocPatterns, p.AllocSizes.Sizes())
		add(stageAllocSize, len(p.AllocCaches), allocPatterns, p.AllocSizes.Sizes())
	}
	if ip := p.Internode; nodes > 1 && len(ip.Transports) > 0 {
		add(stageInterTransport, len(ip.Transports), internodePatterns, ip.Sizes.Sizes())
		add(stageInterEager, len(ip.Eager), internodePatterns, ip.Sizes.Sizes())
		add(stageInterProtocol, max(len(ip.Conns), len(ip.Rendezvous)), internodePatterns, ip.Sizes.Sizes())
		add(stageInterQueue, max(len(ip.SocketBufs), len(ip.Credits)), internodePatterns, ip.Sizes.Sizes())
	}
	if g := p.GPU; g.GPUs != "" {
		loaded := func(stage string, cands int, pattern bench.Pattern, sizes []int) {
			for _, l := range g.Loads {
				out = append(out, plannedTrial{stage: stage, count: cands, pattern: pattern, sizes: sizes, gpu: true, loaded: l.Fraction > 0})
			}
		}
		loaded(stageGPUPath, len(g.Thresholds)*len(g.Staging), bench.Latency, g.Sizes.Sizes())
		loaded(stageGPUCopy, len(g.Copies), bench.Latency, g.CopySizes.Sizes())
		loaded(stageGPUDone, len(g.Completions), bench.Bandwidth, g.CompletionSizes.Sizes())
		loaded(stageGPURelay, len(g.Relays), bench.Latency, g.RelaySizes.Sizes())
		loaded(stageGPUCache, len(g.IPCCaches), bench.Latency, g.CacheSizes.Sizes())
		if len(g.PinnedThresholds) > 0 {
			out = append(out, plannedTrial{stage: stageGPUPinned, count: len(g.PinnedThresholds), pattern: bench.Bandwidth, sizes: g.PinnedSizes.Sizes(), gpu: true})
		}
	}
	if vs := p.VerifySizes.Sizes(); len(vs) > 0 {
		add(stageVerify, p.VerifyRounds*(len(p.Transports)+1), []bench.Pattern{bench.Bandwidth}, vs)
	}
	return out
}

// trialWork is what a host trial moves, in bytes: every warm-up and timed
// iteration's payload as the plan caps it (bench's RepBytes rule), and the
// settling pass. A latency round trip counts latencyTripBytes besides its
// payload: ranks wait on each other, which moving data does not show.
func trialWork(p Plan, pattern bench.Pattern, sizes []int) float64 {
	window := p.window(pattern)
	if pattern == bench.Latency || window < 1 {
		window = 1
	}
	reps := max(p.Reps, 1)
	one := func(size, reps int) float64 {
		iters, warmup := bench.DefaultIters(pattern, size)
		if rb := p.repBytes(pattern); rb > 0 {
			iters, warmup = bench.CapIterations(rb, size, window, iters, warmup)
		}
		msgs := float64(reps*iters+warmup) * float64(window)
		w := msgs * float64(size)
		if pattern == bench.Latency {
			w = msgs * (2*float64(size) + latencyTripBytes)
		}
		return w
	}
	total := 0.0
	if p.Settle > 0 {
		total += one(int(p.Settle), 1)
	}
	for _, n := range sizes {
		total += one(n, reps)
	}
	return total
}

// latencyTripBytes is a ping-pong round trip's cost in bytes moved: on the
// development VM a round trip took about what 10 KiB of bandwidth traffic
// did (eager latency trials 0.48 s against 0.2 s for their payload at the
// pace of the bandwidth trials).
const latencyTripBytes = 10 << 10

// pace prices trials from this run's own: a host trial costs a fixed
// start (rank processes, bootstrap, the settling pass) plus seconds per
// byte of trialWork; pair and node (multi-rank) trials, alloc trials
// (allocation churn) and GPU trials keep their own. One rate per byte
// alone overprices every large trial from a run's first, small ones,
// whose time is mostly the start: on the device machine's CPUs that gave
// up every optional round at the first stage. One rate for pairs and
// nodes prices every pair trial after the geometry stages at a node's
// start (a 14-rank trial took 5 s where its pair took 0.5 s), which left a
// sweep's confirmation one round.
type pace struct {
	pair, node          hostPace
	allocSec, allocWork float64
	gpuSec              [2]float64 // by loaded
	gpuN                [2]int
}

// hostPace is what host trials of one kind took.
type hostPace struct {
	sec, work float64
	n         int
	min       float64 // the quickest trial's seconds
}

// add counts a trial of sec seconds that moved work bytes.
func (hp *hostPace) add(sec, work float64) {
	if hp.n == 0 || sec < hp.min {
		hp.min = sec
	}
	hp.n++
	hp.sec += sec
	hp.work += work
}

// Fallbacks before a run has measured anything of a kind, from the quick
// plan's runs of record: host trials 0.15 s per GiB moved and alloc trials
// 3.6 times that (the development VM); a GPU trial 1.4 s without load and
// 10 s beside the load kernel (2 x H200).
// paceWeight is the work the fallback rate counts as beside a run's own.
const (
	hostSecPerByte = 0.15 / (1 << 30)
	allocFactor    = 3.6
	gpuIdleSec     = 1.4
	gpuLoadedSec   = 10
	paceWeight     = 512 << 20
	// startShare of the quickest host trial counts as the fixed start of
	// every host trial.
	startShare = 0.8
)

func (r *Runner) pace() pace {
	var pc pace
	for _, t := range r.trials {
		if t.Failed != "" || t.Seconds <= 0 {
			continue
		}
		switch {
		case t.GPU != nil:
			i := 0
			if t.GPU.Load > 0 {
				i = 1
			}
			pc.gpuSec[i] += t.Seconds
			pc.gpuN[i]++
		case t.Pattern == allocPattern:
			pc.allocSec += t.Seconds
			pc.allocWork += trialWork(r.plan, t.Pattern, t.Sizes)
		case nodeTrial(t.Pattern, t.Ranks):
			pc.node.add(t.Seconds, trialWork(r.plan, t.Pattern, t.Sizes))
		default:
			pc.pair.add(t.Seconds, trialWork(r.plan, t.Pattern, t.Sizes))
		}
	}
	return pc
}

// host is the fixed start and the seconds per byte of a host trial: the
// start from the quickest trial, the rate from what the others took
// beyond their starts, weighed with the fallback rate over paceWeight.
// A node trial before any was measured is priced as a pair trial.
func (pc pace) host(node bool) (start, perByte float64) {
	hp := pc.pair
	if node && pc.node.n > 0 {
		hp = pc.node
	}
	if hp.n == 0 {
		return 0, hostSecPerByte
	}
	start = startShare * hp.min
	beyond := max(0, hp.sec-float64(hp.n)*start)
	return start, (beyond + hostSecPerByte*paceWeight) / (hp.work + paceWeight)
}

// seconds estimates one planned trial at pace pc.
func (pc pace) seconds(p Plan, t plannedTrial) float64 {
	start, host := pc.host(nodeTrial(t.pattern, 0))
	switch {
	case t.gpu:
		i, fallback := 0, gpuIdleSec
		if t.loaded {
			i, fallback = 1, gpuLoadedSec
		}
		if pc.gpuN[i] > 0 {
			return pc.gpuSec[i] / float64(pc.gpuN[i])
		}
		return fallback
	case t.pattern == allocPattern:
		if pc.allocWork > 0 {
			return pc.allocSec / pc.allocWork * trialWork(p, t.pattern, t.sizes)
		}
		return start + allocFactor*host*trialWork(p, t.pattern, t.sizes)
	default:
		return start + host*trialWork(p, t.pattern, t.sizes)
	}
}

// requiredAfter estimates the required work after stage: the trials of
// requiredTrials that follow it, at this run's pace, and the safety phase
// (probeReserve; GPU mode probes a deadline per mode).
func (r *Runner) requiredAfter(stage string) time.Duration {
	at := stageIndex(stage)
	pc := r.pace()
	sec := 0.0
	for _, t := range requiredTrials(r.plan, len(r.meta.Nodes), r.geometryRanks()) {
		if stageIndex(t.stage) > at {
			sec += float64(t.count) * pc.seconds(r.plan, t)
		}
	}
	probes := probeReserve(r.plan)
	if at < stageIndex(stageGPUPath) {
		probes += time.Duration(len(r.plan.GPU.Staging)+len(r.plan.GPU.AllocModes)) * r.plan.ProbeDeadline
	}
	return time.Duration(sec*float64(time.Second)) + probes + 10*time.Second
}

// probeReserve is what the safety phase's probes take, about: each probe's
// own estimate (probe.Probe.Cost: H8 about 14 deadlines, most a few); a
// probe this build lacks is warned about, not run.
func probeReserve(p Plan) time.Duration {
	var d time.Duration
	for _, id := range p.Probes {
		if pr, err := probe.Lookup(id); err == nil {
			d += pr.Cost(p.ProbeDeadline)
		}
	}
	return d
}

// nodeTrial says whether a trial of pattern at ranks ranks (0: the
// pattern's own) starts a node's ranks rather than a pair: it is priced
// at the node trials' pace.
func nodeTrial(pattern bench.Pattern, ranks int) bool { return ranks > 2 || pattern.MultiRank() }

// transportExtraRounds is how many rounds beyond its plan the transport
// stage may give an unsettled size.
func transportExtraRounds(p Plan) int { return max(p.MaxRound-p.Rounds, 0) }

// middle is up to n sizes from the middle of a ladder: what a stage's
// extra work is priced at before it knows where it will measure.
func middle(ladder []int, n int) []int {
	if len(ladder) <= n {
		return ladder
	}
	from := (len(ladder) - n) / 2
	return ladder[from : from+n]
}
