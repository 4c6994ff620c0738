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
// gpu-path/LOAD: every staging mode × IPC threshold moves device messages
// GPU to GPU (latency at plan.GPU.Sizes), once per load level of the
// concurrent kernel. A trial that stalled beside the kernel (a pass ended
// only at the kernel's time bound) is out, like a hang: the profile never
// takes a path that waits for a running kernel. The path is chosen among
// the candidates that progressed at every load, by their standing without
// load (the other loads' standings are reported).
//
// gpu-pinned: the size from which sends from pinned host memory are pushed
// into device receives by one DMA (bandwidth, pinned to device).
//
// gpu-alloc: probe H2's safe form on every allocator mode (plain is its
// unsafe form); among the modes that pass, the cheapest allocate+free
// beside a kernel wins.

const (
	stageGPUPath   = "gpu-path"
	stageGPUPinned = "gpu-pinned"
)

// GPUParams are the decided GPU settings.
type GPUParams struct {
	GPUs            string
	Threshold       int    // cudaipc.threshold
	Staging         string // cudaipc.staging
	PinnedThreshold int    // cudaipc.pinned-threshold
	Alloc           string // gpu.alloc
	// Stalled lists the candidates that waited for a kernel, by load.
	Stalled []string
	// AllocVerdicts are H2's verdicts by mode.
	AllocVerdicts []ProbeRecord
}

// options renders the GPU decisions as cudaipc.* and gpu.* options.
func (g *GPUParams) options() transports.Options {
	if g == nil {
		return nil
	}
	o := transports.Options{"cudaipc.gpus": g.GPUs, "cudaipc.threshold": itoa(g.Threshold),
		"cudaipc.staging": g.Staging, "cudaipc.pinned-threshold": itoa(g.PinnedThreshold)}
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

func gpuPathCands(g GPUPlan, base transports.Options) []candidate {
	var out []candidate
	for si, st := range g.Staging {
		for _, th := range g.Thresholds {
			n, _ := transports.ParseSize(th)
			o := base.With(transports.Options{"cudaipc.staging": st, "cudaipc.threshold": itoa(n)})
			// Cheaper: async staging (it cannot couple to a kernel), then
			// fewer IPC mappings (a higher threshold).
			out = append(out, candidate{name: "staging=" + st + ",ipc>=" + transports.FormatSize(n), transport: "cudaipc",
				opts: o, cost: int64(si)<<40 - int64(n)})
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
	base := sm.options()
	delete(base, "sm.progress") // cudaipc polls
	base["cudaipc.gpus"] = g.GPUs
	gpuSizes, _ := sizes("gpu.sizes", g.Sizes)

	cands := gpuPathCands(g, base)
	for _, l := range g.Loads {
		load, _ := bench.ParseKernel(l)
		tg := &TrialGPU{Mem: "device,device", GPUs: g.GPUs, Load: load}
		if load > 0 {
			tg.LoadBound = g.LoadBound
		}
		if err := r.measureOn(stageGPUPath+"/"+l, cands, []bench.Pattern{bench.Latency}, gpuSizes, r.plan.Rounds, tg); err != nil {
			return err
		}
	}
	perLoad, d, avoided, keep := decideGPUPath(r.trials, g.Loads, cands)
	out.Stages = append(out.Stages, perLoad...)
	gp.Stalled = avoided
	if len(keep) == 0 {
		return fmt.Errorf("gpu: every device path stalled or failed at some load: %s", strings.Join(avoided, "; "))
	}
	out.Stages = append(out.Stages, d)
	if c := find(keep, d.Chosen); c != nil {
		gp.Staging = c.opts["cudaipc.staging"]
		gp.Threshold, _ = transports.ParseSize(c.opts["cudaipc.threshold"])
	}

	// Pinned host to device: the push threshold.
	if len(g.PinnedThresholds) > 0 {
		pinnedSizes, _ := sizes("gpu.pinned_sizes", g.PinnedSizes)
		var pc []candidate
		for _, th := range g.PinnedThresholds {
			n, _ := transports.ParseSize(th)
			o := base.With(transports.Options{"cudaipc.staging": gp.Staging, "cudaipc.threshold": itoa(gp.Threshold), "cudaipc.pinned-threshold": itoa(n)})
			pc = append(pc, candidate{name: "pinned>=" + transports.FormatSize(n), transport: "cudaipc", opts: o, cost: -int64(n)})
		}
		tg := &TrialGPU{Mem: "pinned,device", GPUs: g.GPUs}
		if err := r.measureOn(stageGPUPinned, pc, []bench.Pattern{bench.Bandwidth}, pinnedSizes, r.plan.Rounds, tg); err != nil {
			return err
		}
		d := pickCheapest(r.trials, stageGPUPinned, []bench.Pattern{bench.Bandwidth}, pc)
		out.Stages = append(out.Stages, d)
		if c := find(pc, d.Chosen); c != nil {
			gp.PinnedThreshold, _ = transports.ParseSize(c.opts["cudaipc.pinned-threshold"])
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

// decideGPUPath weighs the device paths: a decision per load level, the
// candidates out at any load (stalled or failed) with why, and the final
// choice among the rest by their standing at the first load (normally
// none): the runtime cannot know whether a kernel runs, so the path must
// progress at every load and be fast without one.
func decideGPUPath(trials []Trial, loads []string, cands []candidate) (perLoad []StageDecision, final StageDecision, avoided []string, keep []candidate) {
	out := map[string]bool{}
	for _, l := range loads {
		stage := stageGPUPath + "/" + l
		perLoad = append(perLoad, pickCheapest(trials, stage, []bench.Pattern{bench.Latency}, cands))
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
	final = StageDecision{Stage: stageGPUPath}
	if len(keep) > 0 && len(loads) > 0 {
		final = pickCheapest(trials, stageGPUPath+"/"+loads[0], []bench.Pattern{bench.Latency}, keep)
		final.Stage = stageGPUPath
	}
	return perLoad, final, avoided, keep
}

// failedWhy is the first failure of a candidate's trials in a stage.
func failedWhy(trials []Trial, stage, cand string) string {
	for _, t := range trials {
		if t.Stage == stage && t.Candidate == cand && t.Failed != "" {
			return t.Failed
		}
	}
	return ""
}

// allocMode runs H2 on every allocator mode of the plan (plain as H2's
// unsafe form) and picks, among the modes that pass, the one whose
// allocate+free beside a kernel is cheapest.
func (r *Runner) allocMode(gp *GPUParams) error {
	p, err := probe.Lookup("H2")
	if err != nil {
		r.notes = append(r.notes, "gpu allocator: no probe H2 in this build; gpu.alloc not decided")
		return nil
	}
	best, bestNS := "", 0.0
	for _, m := range r.plan.GPU.AllocModes {
		opts := transports.Options{"cudaipc.gpus": gp.GPUs, gpumem.OptionKey: m}
		unsafe := m == string(gpumem.Plain)
		v, _, err := r.probeOnce(p, unsafe, opts)
		if err != nil {
			return err
		}
		v.Options = opts
		gp.AllocVerdicts = append(gp.AllocVerdicts, v)
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
