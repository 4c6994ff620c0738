package sweep

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cudaipc"
	"github.com/gotune/gotune/transports/gpumem"
	"github.com/gotune/gotune/tuner/probe"
)

// The GPU stages (plan.GPU; skipped when it names no GPUs).
//
// Before them probe H4 screens the staging modes: one that couples a
// staged copy to a kernel on a blocking stream (sync, on the legacy
// stream) is out of every candidate.
//
// gpu-path/LOAD: every staging mode × IPC threshold moves device messages
// GPU to GPU (latency at plan.GPU.Sizes), once per load level of the
// concurrent kernel. A trial that stalled beside the kernel (a pass ended
// only at the kernel's time bound) is out, like a hang: the profile never
// takes a path that waits for a running kernel. The path is chosen among
// the candidates that progressed at every load, by their standing without
// load (the other loads' standings are reported).
//
// gpu-copy/LOAD: how the single copy between device buffers moves, by a
// copy engine (cuMemcpyAsync) or by a copy kernel on the SMs, measured as
// the one-way time of large device-to-device messages at every load level
// and decided like the path: a copy that stalls beside the kernel is out.
// (Latency, not bandwidth: a stall is one step of half the kernel's bound
// or more, and a bandwidth step is a whole window of messages, which a
// slowed but moving copy can take that long to finish.)
//
// gpu-completion/LOAD: how a single copy's end reaches both ranks, an IPC
// event recorded after each copy or a flag the copy stream stores once
// per progress pass (cudaipc.completion), measured as the bandwidth of
// mid-size device-to-device messages, where a mark per message costs the
// copy engine a bubble, at every load level and decided like the path.
//
// gpu-relay/LOAD: the largest device-to-device copy the rank's relay
// block moves (cudaipc.relay; 0: none), measured as the latency of small
// device-to-device messages at every load level and decided like the
// path; ties go to the smaller (a running block holds a slot, and calls
// that wait for the whole context wait for it). Skipped when the completion decided is sync, which the
// relay cannot complete by; a relay the transport refuses (ranks sharing
// a GPU) fails its trials and is out.
//
// gpu-cache/LOAD: how many opened peer allocations a rank keeps, measured
// as latency with plan.GPU.IPCBuffers device buffers taken in turn (an
// application's working set): a cache smaller than it opens and closes a
// mapping per message. Decided like the path; among candidates within
// noise of the best, the smallest cache wins (every mapping keeps a peer's
// allocation alive until it is closed).
//
// gpu-pinned: the size from which sends from pinned host memory are pushed
// into device receives by one DMA (bandwidth, pinned to device).
//
// gpu-alloc: probe H2's safe form on every allocator mode (plain is its
// unsafe form); among the modes that pass, the cheapest allocate+free
// beside a kernel wins.

const (
	stageGPUPath   = "gpu-path"
	stageGPUCopy   = "gpu-copy"
	stageGPUDone   = "gpu-completion"
	stageGPURelay  = "gpu-relay"
	stageGPUCache  = "gpu-cache"
	stageGPUPinned = "gpu-pinned"
)

// GPUParams are the decided GPU settings.
type GPUParams struct {
	GPUs            string
	Threshold       int    // cudaipc.threshold
	Staging         string // cudaipc.staging
	PinnedThreshold int    // cudaipc.pinned-threshold
	Copy            string // cudaipc.copy ("": not decided)
	Completion      string // cudaipc.completion ("": not decided)
	Relay           int    // cudaipc.relay (0: none, or not decided)
	Cache           int    // cudaipc.cache (0: not decided)
	Alloc           string // gpu.alloc
	// Stalled lists the candidates that waited for a kernel, by load.
	Stalled []string
	// AllocVerdicts are H2's verdicts by mode.
	AllocVerdicts []ProbeRecord
	// StagingVerdicts are H4's verdicts by staging mode.
	StagingVerdicts []ProbeRecord
}

// options renders the GPU decisions as cudaipc.* and gpu.* options.
func (g *GPUParams) options() transports.Options {
	if g == nil {
		return nil
	}
	o := transports.Options{cudaipc.KeyGPUs: g.GPUs, cudaipc.KeyThreshold: itoa(g.Threshold),
		cudaipc.KeyStaging: g.Staging, cudaipc.KeyPinnedThreshold: itoa(g.PinnedThreshold)}
	if g.Copy != "" {
		o[cudaipc.KeyCopy] = g.Copy
	}
	if g.Completion != "" {
		o[cudaipc.KeyCompletion] = g.Completion
	}
	if g.Relay > 0 {
		o[cudaipc.KeyRelay] = itoa(g.Relay)
	}
	if g.Cache > 0 {
		o[cudaipc.KeyCache] = itoa(g.Cache)
	}
	if g.Alloc != "" {
		o[gpumem.OptionKey] = g.Alloc
	}
	return o
}

// apply puts a GPU trial's buffers, devices and load into spec.
func (g *TrialGPU) apply(spec *bench.Spec) error {
	if g == nil {
		return nil
	}
	mem, err := bench.ParseMem(g.Mem)
	if err != nil {
		return fmt.Errorf("mem: %w", err)
	}
	gpus, err := bench.ParseGPUs(g.GPUs)
	if err != nil {
		return fmt.Errorf("gpus: %w", err)
	}
	spec.Mem, spec.GPUs, spec.GPULoad, spec.GPULoadBound = mem, gpus, g.Load, g.LoadBound
	spec.Buffers = g.Buffers
	spec.CPUs = nil // the GPU's NUMA node, not the host stages' cores
	return nil
}

// stalled says why a trial is out for waiting on the load kernel ("" if
// it is not).
func stalled(t Trial) string {
	if t.GPU == nil || t.GPU.Load == 0 {
		return ""
	}
	var at []string
	for _, p := range t.Points {
		if p.Stalled() {
			at = append(at, fmt.Sprintf("%s (a step waited %v)", transports.FormatSize(p.Size), p.LoadWait.Round(time.Millisecond)))
		}
	}
	if len(at) == 0 {
		return ""
	}
	return fmt.Sprintf("stalled: waited for the GPU load kernel (%s, bound %v) at %s", bench.KernelName(t.GPU.Load), t.GPU.LoadBound, strings.Join(at, ", "))
}

func gpuPathCands(g GPUPlan, staging []string, base transports.Options) []candidate {
	var out []candidate
	for si, st := range staging {
		for _, th := range g.Thresholds {
			n := int(th)
			o := base.With(transports.Options{cudaipc.KeyStaging: st, cudaipc.KeyThreshold: itoa(n)})
			// Cheaper: async staging (it cannot couple to a kernel), then
			// fewer IPC mappings (a higher threshold).
			out = append(out, candidate{name: "staging=" + st + ",ipc>=" + th.String(), transport: "cudaipc",
				opts: o, cost: int64(si)<<40 - int64(n), gpu: GPUParams{Staging: st, Threshold: n}})
		}
	}
	return out
}

// gpuStages runs (or replays) the GPU stages and decides.
func (r *Runner) gpuStages(sm SMParams, out *Outcome) error {
	g := r.plan.GPU
	if g.GPUs == "" {
		return nil
	}
	gp := &GPUParams{GPUs: g.GPUs, Threshold: cudaipc.DefaultThreshold, Staging: "async", PinnedThreshold: cudaipc.DefaultPinnedThreshold}
	base := cudaipc.Polling(sm.options())
	base[cudaipc.KeyGPUs] = g.GPUs

	staging, err := r.safeStaging(gp)
	if err != nil {
		return err
	}
	c, err := r.loadedStage(stageGPUPath, gpuPathCands(g, staging, base), bench.Latency, g.Sizes.Sizes(), 0, gp, out)
	if err != nil {
		return err
	}
	if c != nil {
		gp.Staging, gp.Threshold = c.gpu.Staging, c.gpu.Threshold
	}
	decided := func() transports.Options { return base.With(gp.options()) }

	// Copy engines or SMs for the single copy (cheaper: the plan's order).
	i, err := r.gpuOptionStage(stageGPUCopy, cudaipc.KeyCopy, g.Copies, func(i int) int64 { return int64(i) },
		bench.Latency, g.CopySizes.Sizes(), 0, decided(), gp, out)
	if err != nil {
		return err
	}
	if i >= 0 {
		gp.Copy = g.Copies[i]
	}

	// How a copy's end reaches both ranks (cheaper: the plan's order).
	i, err = r.gpuOptionStage(stageGPUDone, cudaipc.KeyCompletion, g.Completions, func(i int) int64 { return int64(i) },
		bench.Bandwidth, g.CompletionSizes.Sizes(), 0, decided(), gp, out)
	if err != nil {
		return err
	}
	if i >= 0 {
		gp.Completion = g.Completions[i]
	}

	// The relay block for small copies (cheaper: smaller, 0 none).
	if gp.Completion == cudaipc.CompleteSync && len(g.Relays) > 0 {
		r.notes = append(r.notes, "gpu: cudaipc.relay not weighed: the completion decided is sync, which the relay cannot complete by")
	} else {
		relays := make([]string, len(g.Relays))
		for i, n := range g.Relays {
			relays[i] = itoa(int(n))
		}
		i, err = r.gpuOptionStage(stageGPURelay, cudaipc.KeyRelay, relays, func(i int) int64 { return int64(g.Relays[i]) },
			bench.Latency, g.RelaySizes.Sizes(), 0, decided(), gp, out)
		if err != nil {
			return err
		}
		if i >= 0 {
			gp.Relay = int(g.Relays[i])
		}
	}

	// IPC mapping cache under a working set of buffers (cheaper: smaller).
	caches := make([]string, len(g.IPCCaches))
	for i, n := range g.IPCCaches {
		caches[i] = itoa(n)
	}
	i, err = r.gpuOptionStage(stageGPUCache, cudaipc.KeyCache, caches, func(i int) int64 { return int64(g.IPCCaches[i]) },
		bench.Latency, g.CacheSizes.Sizes(), g.IPCBuffers, decided(), gp, out)
	if err != nil {
		return err
	}
	if i >= 0 {
		gp.Cache = g.IPCCaches[i]
	}

	// Pinned host to device: the push threshold.
	if len(g.PinnedThresholds) > 0 {
		var pc []candidate
		for _, th := range g.PinnedThresholds {
			n := int(th)
			o := decided().With(transports.Options{cudaipc.KeyPinnedThreshold: itoa(n)})
			pc = append(pc, candidate{name: "pinned>=" + th.String(), transport: "cudaipc", opts: o, cost: -int64(n), gpu: GPUParams{PinnedThreshold: n}})
		}
		tg := &TrialGPU{Mem: "pinned,device", GPUs: g.GPUs}
		if err := r.measureOn(stageGPUPinned, pc, []bench.Pattern{bench.Bandwidth}, g.PinnedSizes.Sizes(), r.plan.Rounds, tg); err != nil {
			return err
		}
		d := pickCheapest(r.trials, stageGPUPinned, []bench.Pattern{bench.Bandwidth}, pc)
		out.Stages = append(out.Stages, d)
		if c := find(pc, d.Chosen); c != nil {
			gp.PinnedThreshold = c.gpu.PinnedThreshold
		}
	}

	// Allocator mode: H2's verdicts.
	if len(g.AllocModes) > 0 {
		if err := r.allocMode(gp); err != nil {
			return err
		}
	}
	out.GPU = gp
	return nil
}

// gpuOptionStage weighs the values of one cudaipc option (key) at every
// load, a candidate per value named after the option (copy=ce, cache=64)
// with cost(i) for values[i], on top of base, measured by pattern, and
// returns the index of the value chosen. It returns -1 without measuring when the plan names no
// values, or when no size it is weighed at goes by CUDA IPC (a note says
// so), and -1 when no value was chosen.
func (r *Runner) gpuOptionStage(stage, key string, values []string, cost func(i int) int64, pattern bench.Pattern, sizes []int, buffers int,
	base transports.Options, gp *GPUParams, out *Outcome) (int, error) {
	if len(values) == 0 {
		return -1, nil
	}
	if slices.Max(sizes) < gp.Threshold {
		r.notes = append(r.notes, fmt.Sprintf("gpu: %s not decided: no size it is weighed at reaches the IPC threshold %s", key, transports.FormatSize(gp.Threshold)))
		return -1, nil
	}
	cands := make([]candidate, len(values))
	for i, v := range values {
		cands[i] = candidate{name: strings.TrimPrefix(key, "cudaipc.") + "=" + v, transport: "cudaipc",
			opts: base.With(transports.Options{key: v}), cost: cost(i)}
	}
	c, err := r.loadedStage(stage, cands, pattern, sizes, buffers, gp, out)
	if err != nil || c == nil {
		return -1, err
	}
	return slices.IndexFunc(cands, func(x candidate) bool { return x.name == c.name }), nil
}

// loadedStage measures device-to-device candidates (buffers in turn per
// rank, 0: one) at every load level of the plan, as stage/LOAD, and
// decides with decideLoaded. It appends the per-load decisions and the
// final one to out.Stages and the candidates out to gp.Stalled, and
// returns the chosen candidate (nil if none was).
func (r *Runner) loadedStage(stage string, cands []candidate, pattern bench.Pattern, sizes []int, buffers int, gp *GPUParams, out *Outcome) (*candidate, error) {
	g := r.plan.GPU
	left := cands // a candidate out at one load is not measured at the next
	// Round by round across the loads: every load's first round is
	// required, and the budget's estimate of what must still run
	// (requiredAfter) counts the stages after this one only.
	for round := 1; round <= r.plan.Rounds; round++ {
		for _, l := range g.Loads {
			tg := &TrialGPU{Mem: "device,device", GPUs: g.GPUs, Load: l.Fraction, Buffers: buffers}
			if l.Fraction > 0 {
				tg.LoadBound = g.LoadBound
			}
			if err := r.measureRounds(stage+"/"+l.Name, left, []bench.Pattern{pattern}, sizes, round, round, 1, tg); err != nil {
				return nil, err
			}
			left = slices.DeleteFunc(slices.Clone(left), func(c candidate) bool { return failedWhy(r.trials, stage+"/"+l.Name, c.name) != "" })
		}
	}
	perLoad, d, avoided, keep := decideLoaded(r.trials, stage, pattern, g.Loads, cands)
	out.Stages = append(out.Stages, perLoad...)
	gp.Stalled = append(gp.Stalled, avoided...)
	if len(keep) == 0 {
		return nil, fmt.Errorf("gpu: every candidate of %s stalled or failed at some load: %s", stage, strings.Join(avoided, "; "))
	}
	out.Stages = append(out.Stages, d)
	return find(keep, d.Chosen), nil
}

// decideLoaded weighs candidates measured at every load level (stages
// stage/LOAD): a decision per load level, the candidates out at any load
// (stalled or failed) with why, and the final choice among the rest by
// their standing at the first load (normally none): the runtime cannot
// know whether a kernel runs, so what it uses must progress at every load
// and be fast without one.
func decideLoaded(trials []Trial, stage string, pattern bench.Pattern, loads []Load, cands []candidate) (perLoad []StageDecision, final StageDecision, avoided []string, keep []candidate) {
	out := map[string]bool{}
	patterns := []bench.Pattern{pattern}
	for _, l := range loads {
		stage := stage + "/" + l.Name
		perLoad = append(perLoad, pickCheapest(trials, stage, patterns, cands))
		for _, c := range cands {
			if why := failedWhy(trials, stage, c.name); why != "" && !out[c.name] {
				out[c.name] = true
				avoided = append(avoided, fmt.Sprintf("%s at load %s: %s", c.name, l, why))
			}
		}
	}
	for _, c := range cands {
		if !out[c.name] {
			keep = append(keep, c)
		}
	}
	final = StageDecision{Stage: stage}
	if len(keep) > 0 && len(loads) > 0 {
		final = pickCheapest(trials, stage+"/"+loads[0].Name, patterns, keep)
		final.Stage = stage
	}
	return perLoad, final, avoided, keep
}

// failedWhy is the first failure of a candidate's trials in a stage ("":
// none failed).
func failedWhy(trials []Trial, stage, cand string) string {
	for _, t := range trials {
		if t.Stage == stage && t.Candidate == cand && t.Failed != "" {
			return t.Failed
		}
	}
	return ""
}

// safeStaging runs probe H4 on every staging mode of the plan (sync as
// its unsafe form) and returns the modes that passed; a mode H4 catches is
// out before anything is measured, with H4's verdict among the avoided.
// Without H4 in this build every mode stays, and a note says so.
func (r *Runner) safeStaging(gp *GPUParams) ([]string, error) {
	modes := r.plan.GPU.Staging
	verdicts, found, err := r.probeModes("H4", cudaipc.KeyStaging, modes, "sync", gp.GPUs)
	if err != nil {
		return nil, err
	}
	if !found {
		r.notes = append(r.notes, "gpu staging: no probe H4 in this build; staging modes not screened")
		return modes, nil
	}
	gp.StagingVerdicts = verdicts
	var safe []string
	for i, v := range verdicts {
		m := modes[i]
		if v.Outcome == probe.Passed.String() {
			safe = append(safe, m)
			continue
		}
		gp.Stalled = append(gp.Stalled, fmt.Sprintf("staging=%s: probe H4: %s: %s", m, v.Outcome, v.Detail))
	}
	if len(safe) == 0 {
		return nil, fmt.Errorf("gpu staging: no mode of %v passed H4: %s", modes, strings.Join(gp.Stalled, "; "))
	}
	return safe, nil
}

// probeModes runs probe id on every mode of one setting (key=mode on the
// GPUs gpus; unsafeMode is the probe's unsafe form) and returns the
// verdicts in the order of modes. found is false when this build has no
// such probe.
func (r *Runner) probeModes(id, key string, modes []string, unsafeMode, gpus string) (verdicts []ProbeRecord, found bool, err error) {
	p, err := probe.Lookup(id)
	if err != nil {
		return nil, false, nil
	}
	for _, m := range modes {
		v, _, err := r.probeOnce(p, m == unsafeMode, transports.Options{cudaipc.KeyGPUs: gpus, key: m})
		if err != nil {
			return nil, true, err
		}
		verdicts = append(verdicts, v)
	}
	return verdicts, true, nil
}

// allocMode runs H2 on every allocator mode of the plan (plain as H2's
// unsafe form) and picks, among the modes that pass, the one whose
// allocate+free beside a kernel is cheapest.
func (r *Runner) allocMode(gp *GPUParams) error {
	modes := r.plan.GPU.AllocModes
	verdicts, found, err := r.probeModes("H2", gpumem.OptionKey, modes, string(gpumem.Plain), gp.GPUs)
	if err != nil {
		return err
	}
	if !found {
		r.notes = append(r.notes, "gpu allocator: no probe H2 in this build; gpu.alloc not decided")
		return nil
	}
	gp.AllocVerdicts = verdicts
	best, bestNS := "", 0.0
	for i, v := range verdicts {
		m := modes[i]
		if v.Outcome != probe.Passed.String() {
			continue
		}
		ns, ok := v.Measured["alloc_free_loaded_ns"]
		if !ok {
			continue
		}
		if best == "" || ns < bestNS {
			best, bestNS = m, ns
		}
	}
	if best == "" {
		return fmt.Errorf("gpu allocator: no mode of %v passed H2", r.plan.GPU.AllocModes)
	}
	gp.Alloc = best
	if !slices.Contains(r.plan.Probes, "H2") {
		r.notes = append(r.notes, "gpu allocator: chosen by H2's verdicts, though H2 is not in the plan's probes")
	}
	return nil
}
