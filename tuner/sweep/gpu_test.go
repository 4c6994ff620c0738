package sweep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cudaipc"
	"github.com/gotune/gotune/transports/gpumem"
	"github.com/gotune/gotune/transports/sm"
)

// gpuTrial fabricates a device-path trial at a load; late marks every
// point's passes as ended by the load kernel's bound.
func gpuTrial(load, cand string, round int, late bool, us float64) Trial {
	f, _ := bench.ParseKernel(load)
	t := trial(stageGPUPath+"/"+load, cand, bench.Latency, round, []int{8, 1 << 20}, us, us, us)
	t.Transport, t.GPU = "cudaipc", &TrialGPU{Mem: "device,device", GPUs: "0,1", Load: f, LoadBound: 2 * time.Second}
	if late {
		for i := range t.Points {
			t.Points[i].LoadLate, t.Points[i].LoadWait, t.Points[i].LoadStalled = 4, 1900*time.Millisecond, true
		}
	}
	t.Failed = stalled(t)
	return t
}

// A path that stalls beside a full-GPU kernel is out, even when it is the
// fastest without load; the fastest path that progressed at every load
// is chosen, and the stall is reported.
func TestDecideGPUPathAvoidsStallingPaths(t *testing.T) {
	cands := []candidate{{name: "sync", cost: 1}, {name: "async", cost: 0}, {name: "ipc", cost: 2}}
	loads := parseText[Load]("none", "full")
	var trials []Trial
	for round := 1; round <= 3; round++ {
		trials = append(trials,
			gpuTrial("none", "sync", round, false, 5), gpuTrial("none", "async", round, false, 9), gpuTrial("none", "ipc", round, false, 7),
			gpuTrial("full", "sync", round, true, 2e5), gpuTrial("full", "async", round, false, 3000), gpuTrial("full", "ipc", round, false, 2000))
	}
	perLoad, final, avoided, keep := decideLoaded(trials, stageGPUPath, bench.Latency, loads, cands)
	if len(perLoad) != 2 || perLoad[0].Chosen != "sync" {
		t.Errorf("without load the fastest path is sync; per load: %+v", perLoad)
	}
	if final.Chosen != "ipc" {
		t.Errorf("chose %q, want ipc (sync stalls beside a full kernel; ipc beats async without load)", final.Chosen)
	}
	if len(keep) != 2 || len(avoided) != 1 || avoided[0] != "sync at load full: stalled: waited for the GPU load kernel (full, bound 2s) at 8 (a step waited 1.9s), 1M (a step waited 1.9s)" {
		t.Errorf("avoided %q, kept %d", avoided, len(keep))
	}
	// Every path stalls: nothing to keep, nothing chosen.
	var all []Trial
	for _, c := range cands {
		all = append(all, gpuTrial("none", c.name, 1, false, 5), gpuTrial("full", c.name, 1, true, 5))
	}
	if _, final, avoided, keep := decideLoaded(all, stageGPUPath, bench.Latency, loads, cands); len(keep) != 0 || final.Chosen != "" || len(avoided) != 3 {
		t.Errorf("all stalled: kept %d, chose %q, avoided %d", len(keep), final.Chosen, len(avoided))
	}
}

// A relay the transport refuses (ranks sharing a GPU) fails its trials
// and is out; no relay is chosen though the refused one never measured
// slower, and why it is out is reported.
func TestDecideRelayRefusedIsOut(t *testing.T) {
	cands := []candidate{{name: "relay=0", cost: 0}, {name: "relay=65536", cost: 65536}}
	loads := parseText[Load]("none")
	var trials []Trial
	for round := 1; round <= 2; round++ {
		none := gpuTrial("none", "relay=0", round, false, 150)
		none.Stage = stageGPURelay + "/none"
		refused := gpuTrial("none", "relay=65536", round, false, 0)
		refused.Stage, refused.Points = stageGPURelay+"/none", nil
		refused.Failed = "start cudaipc: cudaipc.relay=65536: ranks 0 and 1 share GPU 0"
		trials = append(trials, none, refused)
	}
	_, final, avoided, keep := decideLoaded(trials, stageGPURelay, bench.Latency, loads, cands)
	if final.Chosen != "relay=0" || len(keep) != 1 {
		t.Errorf("chose %q keeping %d, want relay=0 alone", final.Chosen, len(keep))
	}
	if len(avoided) != 1 || !strings.Contains(avoided[0], "share GPU 0") {
		t.Errorf("avoided %q, want the refusal", avoided)
	}
}

// A trial without a load, or whose passes all ended before the bound, is
// not stalled.
func TestStalled(t *testing.T) {
	tr := gpuTrial("full", "x", 1, false, 1)
	if tr.Failed != "" {
		t.Errorf("progressing trial failed: %s", tr.Failed)
	}
	host := trial("eager", "x", bench.Latency, 1, []int{8}, 1)
	host.Points[0].LoadStalled = true // cannot happen without a load, and is ignored
	if s := stalled(host); s != "" {
		t.Errorf("host trial: %s", s)
	}
}

// Host trials keep the keys they had before GPU trials existed, so that a
// resumed sweep reuses measurements stored by an older gotune; a GPU
// trial's buffers and load are part of its key.
func TestTrialKeys(t *testing.T) {
	host := Trial{Stage: "eager", Candidate: "eager=4K", Transport: "sm", Options: transports.Options{sm.KeyEager: "4096"},
		Pattern: bench.Latency, Sizes: []int{8, 256}, Round: 2}
	// Computed by the key function as it was before Trial.GPU.
	if got, want := host.key(), "trial:1c7470f3dffa872e432f4c4b"; got != want {
		t.Errorf("host trial key %s, want %s", got, want)
	}
	a := host
	a.GPU = &TrialGPU{Mem: "device,device", GPUs: "0,1"}
	b := a
	b.GPU = &TrialGPU{Mem: "device,device", GPUs: "0,1", Load: 1, LoadBound: time.Second}
	c := a
	c.GPU = &TrialGPU{Mem: "device,device", GPUs: "0,1", Buffers: 32}
	if a.key() == host.key() || a.key() == b.key() || a.key() == c.key() {
		t.Error("GPU buffers, load or working set missing from the key")
	}
}

func TestGPUPlanCheck(t *testing.T) {
	if err := GPU().Check(); err != nil {
		t.Fatalf("built-in gpu plan: %v", err)
	}
	if p, err := LoadPlan("gpu"); err != nil || p.Name != "gpu" {
		t.Fatalf("LoadPlan(gpu) = %v, %v", p.Name, err)
	}
	for _, c := range []struct {
		mod  func(*GPUPlan)
		want string
	}{
		{func(g *GPUPlan) { g.GPUs = "0,x" }, "gpu.gpus"},
		{func(g *GPUPlan) { g.Staging = []string{"legacy"} }, `gpu.staging: "legacy"`},
		{func(g *GPUPlan) { g.AllocModes = []string{"cudaFree"} }, "gpu.alloc_modes"},
		{func(g *GPUPlan) { g.LoadBound = 0 }, "gpu.load_bound"},
		{func(g *GPUPlan) { g.Sizes = SizeList{} }, "gpu.sizes: empty"},
		{func(g *GPUPlan) { g.Thresholds = nil }, "gpu.thresholds, gpu.staging and gpu.loads"},
		{func(g *GPUPlan) { g.Copies = []string{"dma"} }, `gpu.copies: "dma"`},
		{func(g *GPUPlan) { g.CopySizes = SizeList{} }, "gpu.copy_sizes: empty"},
		{func(g *GPUPlan) { g.Completions = []string{"event", "poll"} }, `gpu.completions: "poll"`},
		{func(g *GPUPlan) { g.CompletionSizes = SizeList{} }, "gpu.completion_sizes: empty"},
		{func(g *GPUPlan) { g.RelaySizes = SizeList{} }, "gpu.relay_sizes: empty"},
		{func(g *GPUPlan) { g.Relays = parseText[Size]("4K", "64K") }, "gpu.relays: [4K 64K] without 0"},
		{func(g *GPUPlan) { g.IPCCaches = []int{16, 0} }, "gpu.ipc_caches: 0"},
		{func(g *GPUPlan) { g.IPCBuffers = 0 }, "gpu.ipc_buffers"},
		{func(g *GPUPlan) { g.GPUs = "0" }, `gpu.gpus: "0" puts both ranks on GPU 0, and gpu.loads runs the load kernel`},
		{func(g *GPUPlan) { g.GPUs = "1,1" }, `gpu.gpus: "1,1" puts both ranks on GPU 1`},
	} {
		p := GPU()
		c.mod(&p.GPU)
		if err := p.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error naming %q", err, c.want)
		}
	}
	// One GPU for both ranks is a plan without a load kernel.
	one := GPU()
	one.GPU.GPUs = "0"
	one.GPU.Loads = []Load{{Name: "none"}}
	if err := one.Check(); err != nil {
		t.Errorf("both ranks on GPU 0 without a load: %v", err)
	}
	// Values that do not parse are refused when the plan file is decoded.
	for _, c := range []struct{ body, want string }{
		{"loads: [most]", "gpu.loads"},
		{"thresholds: [big]", "gpu.thresholds"},
		{"cache_sizes: \"1M:x\"", "gpu.cache_sizes"},
	} {
		path := filepath.Join(t.TempDir(), "gpu.yaml")
		if err := os.WriteFile(path, []byte("gpu:\n  gpus: \"0,1\"\n  "+c.body+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPlan(path); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: got %v, want an error naming %q and the file", c.body, err, c.want)
		}
	}
	// Without GPUs the GPU keys are not looked at: a host plan.
	p := Quick()
	p.GPU.Staging = []string{"legacy"}
	if err := p.Check(); err != nil {
		t.Errorf("host plan with stray GPU keys: %v", err)
	}
}

// The decided GPU settings render as the transport's options; what was not
// decided (copy, completion, cache) is left to the transport's defaults.
func TestGPUParamsOptions(t *testing.T) {
	g := &GPUParams{GPUs: "0,1", Threshold: 0, Staging: "async", PinnedThreshold: 256 << 10, Alloc: "pool"}
	o := g.options()
	if _, ok := o[cudaipc.KeyCopy]; ok {
		t.Errorf("undecided copy rendered: %v", o)
	}
	if _, ok := o[cudaipc.KeyCache]; ok {
		t.Errorf("undecided cache rendered: %v", o)
	}
	if _, ok := o[cudaipc.KeyCompletion]; ok {
		t.Errorf("undecided completion rendered: %v", o)
	}
	if _, ok := o[cudaipc.KeyRelay]; ok {
		t.Errorf("no relay rendered: %v", o)
	}
	g.Copy, g.Cache, g.Completion, g.Relay = "sm", 16, "flag", 4096
	o = g.options()
	if o[cudaipc.KeyCopy] != "sm" || o[cudaipc.KeyCache] != "16" || o[cudaipc.KeyCompletion] != "flag" || o[cudaipc.KeyRelay] != "4096" || o[gpumem.OptionKey] != "pool" || o[cudaipc.KeyPinnedThreshold] != "262144" {
		t.Errorf("options %v", o)
	}
	if err := transports.CheckKeys(o); err != nil {
		t.Errorf("rendered options are not the transport's: %v", err)
	}
}

// The GPU plan files the GPU scripts run load and pass the checks.
func TestGPUPlanFiles(t *testing.T) {
	files, err := filepath.Glob("../../scripts/gpu/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no plan files under scripts/gpu: %v", err)
	}
	for _, f := range files {
		p, err := LoadPlan(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if err := p.Check(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		if p.GPU.GPUs == "" {
			t.Errorf("%s: no gpu section", f)
		}
	}
}
