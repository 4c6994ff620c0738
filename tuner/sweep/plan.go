package sweep

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/gpumem"
)

// Plan says what a sweep measures and how hard it tries. Sizes are written
// as bench ladders ("256:16K") or lists ("8,256,4K").
type Plan struct {
	Name     string        `json:"name" mapstructure:"name"`
	Budget   time.Duration `json:"budget" mapstructure:"budget"`
	Rounds   int           `json:"rounds" mapstructure:"rounds"`         // interleaved rounds every candidate gets
	MaxRound int           `json:"max_rounds" mapstructure:"max_rounds"` // rounds an unsettled comparison may grow to
	Reps     int           `json:"reps" mapstructure:"reps"`             // repetitions per size per trial
	RepBytes string        `json:"rep_bytes" mapstructure:"rep_bytes"`   // payload per repetition (bench.Spec.RepBytes)
	Window   int           `json:"window" mapstructure:"window"`
	Stall    time.Duration `json:"stall" mapstructure:"stall"`     // watchdog deadline of a measuring trial
	Segment  string        `json:"segment" mapstructure:"segment"` // shared segment backend: memfd or posix
	// Settle is the size of the discarded point, in the trial's own
	// pattern, that opens every trial (bench.WithSettle); "" or "0": none
	// (runs made before it existed).
	Settle string `json:"settle,omitempty" mapstructure:"settle"`

	Eager         []string `json:"eager" mapstructure:"eager"` // eager-limit candidates
	EagerSizes    string   `json:"eager_sizes" mapstructure:"eager_sizes"`
	Fragments     []string `json:"fragments" mapstructure:"fragments"` // SIZExSLOTS candidates, e.g. 64Kx16
	FragmentSizes string   `json:"fragment_sizes" mapstructure:"fragment_sizes"`
	Depths        []int    `json:"depths" mapstructure:"depths"`
	DepthSizes    string   `json:"depth_sizes" mapstructure:"depth_sizes"`
	// ConfirmSizes are where the channel parameters the stages chose are
	// weighed, together, against the built-in ones ("" skips it).
	ConfirmSizes string   `json:"confirm_sizes" mapstructure:"confirm_sizes"`
	Transports   []string `json:"transports" mapstructure:"transports"` // sm, cma (pull), cma-push
	// TransportSizes is the coarse ladder; every LadderStep-th power of two.
	TransportSizes string `json:"transport_sizes" mapstructure:"transport_sizes"`
	LadderStep     int    `json:"ladder_step" mapstructure:"ladder_step"`
	Bisect         bool   `json:"bisect" mapstructure:"bisect"`

	AllocPurges []string `json:"alloc_purges" mapstructure:"alloc_purges"`
	AllocTHP    []bool   `json:"alloc_thp" mapstructure:"alloc_thp"`
	AllocCaches []string `json:"alloc_caches" mapstructure:"alloc_caches"`
	AllocSizes  string   `json:"alloc_sizes" mapstructure:"alloc_sizes"`

	Probes        []string      `json:"probes" mapstructure:"probes"`
	ProbeDeadline time.Duration `json:"probe_deadline" mapstructure:"probe_deadline"`

	VerifySizes    string `json:"verify_sizes" mapstructure:"verify_sizes"` // "" skips the verification stage
	VerifyRounds   int    `json:"verify_rounds" mapstructure:"verify_rounds"`
	FootprintRanks []int  `json:"footprint_ranks" mapstructure:"footprint_ranks"`

	GPU GPUPlan `json:"gpu" mapstructure:"gpu"`
}

// GPUPlan is the GPU part of a sweep (all of it skipped when GPUs is
// empty): the cudaipc path for device messages (staging mode × the size
// from which they go by CUDA IPC), measured with each load level of the
// concurrent kernel, a candidate that stalls beside a kernel is out; the
// pinned-host threshold; copy engines or SMs for the single copy, and the
// IPC mapping cache, each weighed at every load level too; and the GPU
// allocator mode from probe H2's verdicts.
type GPUPlan struct {
	GPUs             string        `json:"gpus" mapstructure:"gpus"`                           // ranks' devices, e.g. "0,1"
	Thresholds       []string      `json:"thresholds" mapstructure:"thresholds"`               // cudaipc.threshold candidates
	Staging          []string      `json:"staging" mapstructure:"staging"`                     // cudaipc.staging candidates
	Loads            []string      `json:"loads" mapstructure:"loads"`                         // none, partial, full, or fractions
	LoadBound        time.Duration `json:"load_bound" mapstructure:"load_bound"`               // each launch of the load kernel
	Sizes            string        `json:"sizes" mapstructure:"sizes"`                         // device-to-device latency sizes
	PinnedThresholds []string      `json:"pinned_thresholds" mapstructure:"pinned_thresholds"` // cudaipc.pinned-threshold candidates
	PinnedSizes      string        `json:"pinned_sizes" mapstructure:"pinned_sizes"`           // pinned-to-device bandwidth sizes
	AllocModes       []string      `json:"alloc_modes" mapstructure:"alloc_modes"`             // gpu.alloc candidates, weighed by probe H2
	Copies           []string      `json:"copies" mapstructure:"copies"`                       // cudaipc.copy candidates: ce, sm
	CopySizes        string        `json:"copy_sizes" mapstructure:"copy_sizes"`               // device-to-device latency sizes for the copy
	IPCCaches        []int         `json:"ipc_caches" mapstructure:"ipc_caches"`               // cudaipc.cache candidates (positive)
	IPCBuffers       int           `json:"ipc_buffers" mapstructure:"ipc_buffers"`             // device buffers per rank taken in turn while weighing the cache
	CacheSizes       string        `json:"cache_sizes" mapstructure:"cache_sizes"`             // latency sizes for the cache
}

// GPU is the built-in plan of `gotune sweep --plan gpu`: the host stages
// with one candidate each (they set what the GPU stages build on), then
// the GPU stages and the probes H2 and H4, on GPUs 0 and 1.
func GPU() Plan {
	p := Quick()
	p.Name, p.Budget, p.Rounds, p.MaxRound = "gpu", 8*time.Minute, 2, 5
	p.Eager, p.Fragments, p.Depths, p.Transports = []string{"4K"}, []string{"64Kx16"}, []int{64}, []string{"sm"}
	p.TransportSizes, p.Bisect, p.ConfirmSizes = "64K", false, ""
	p.AllocPurges, p.AllocTHP, p.AllocCaches = []string{"immediate"}, []bool{false}, []string{"64M"}
	p.Probes, p.ProbeDeadline = []string{"H2", "H4"}, 3*time.Second
	p.VerifySizes = ""
	p.GPU = GPUPlan{
		GPUs: "0,1", Thresholds: []string{"0", "64K", "1G"}, Staging: []string{"async", "sync"},
		Loads: []string{"none", "partial", "full"}, LoadBound: time.Second, Sizes: "8,64K,1M",
		PinnedThresholds: []string{"256K", "4M", "1G"}, PinnedSizes: "1M,16M",
		AllocModes: []string{"plain", "worker", "pool"},
		Copies:     []string{"ce", "sm"}, CopySizes: "1M,16M",
		IPCCaches: []int{4, 16, 64}, IPCBuffers: 32, CacheSizes: "1M",
	}
	return p
}

// Quick is the built-in plan of `gotune sweep` with no flags: every
// decision, a few interleaved rounds, the safety phase, and a check of the
// emitted profile against the single transports, in under 5 minutes on a
// 2-core node.
func Quick() Plan {
	return Plan{
		Name: "quick", Budget: 4*time.Minute + 30*time.Second,
		Rounds: 5, MaxRound: 8, Reps: 3, RepBytes: "64M", Window: bench.DefaultWindow, Stall: 30 * time.Second,
		Segment: "memfd", Settle: "4M",
		Eager: []string{"1K", "2K", "4K", "8K"}, EagerSizes: "256:16K",
		Fragments:     []string{"32Kx8", "64Kx16", "64Kx32", "64Kx64", "128Kx32"},
		FragmentSizes: "16K:16M",
		Depths:        []int{8, 16, 32, 64, 128}, DepthSizes: "8,512,1K,4K,32K",
		ConfirmSizes: "1:16M",
		Transports:   []string{"sm", "cma"}, TransportSizes: "8K:16M", LadderStep: 2, Bisect: true,
		AllocPurges: []string{"immediate", "delayed", "never"}, AllocTHP: []bool{false, true},
		AllocCaches: []string{"8M", "64M", "256M"}, AllocSizes: "64K,1M,4M",
		Probes: []string{"H1", "H3", "H5", "H6", "H8"}, ProbeDeadline: 2 * time.Second,
		VerifySizes: "1:16M", VerifyRounds: 5,
		FootprintRanks: []int{2, 8, 64},
	}
}

// Full measures more candidates, sizes and rounds; budget 30 minutes.
func Full() Plan {
	p := Quick()
	p.Name, p.Budget = "full", 30*time.Minute
	p.Rounds, p.MaxRound, p.Reps, p.RepBytes = 7, 12, 5, "256M"
	p.Eager = []string{"512", "1K", "2K", "4K", "8K", "16K"}
	p.EagerSizes = "64:32K"
	p.Fragments = []string{"16Kx16", "32Kx8", "32Kx32", "64Kx4", "64Kx16", "64Kx32", "64Kx64", "128Kx8", "128Kx32", "256Kx16"}
	p.FragmentSizes = "16K:16M"
	p.Depths = []int{4, 8, 16, 32, 64, 128, 256}
	p.DepthSizes = "8,64,512,1K,4K,8K,32K"
	p.Transports = []string{"sm", "cma", "cma-push"}
	p.TransportSizes, p.LadderStep = "4K:64M", 2
	p.AllocCaches = []string{"0", "8M", "64M", "256M", "1G"}
	p.AllocSizes = "16K:16M"
	p.VerifyRounds = 5
	p.FootprintRanks = []int{2, 8, 32, 64, 128}
	return p
}

// LoadPlan returns a built-in plan by name or reads a YAML plan file. A
// file may set any subset of the keys; the rest come from the quick plan.
// An unknown key or a value of the wrong type is an error naming the key
// and the file.
func LoadPlan(name string) (Plan, error) {
	switch name {
	case "", "quick":
		return Quick(), nil
	case "full":
		return Full(), nil
	case "gpu":
		return GPU(), nil
	}
	v := viper.New()
	v.SetConfigFile(name)
	v.SetConfigType(strings.TrimPrefix(filepath.Ext(name), "."))
	if ext := filepath.Ext(name); ext != ".yaml" && ext != ".yml" && ext != ".json" {
		v.SetConfigType("yaml")
	}
	if _, err := os.Stat(name); err != nil {
		return Plan{}, fmt.Errorf("plan %q: not quick, full or a readable file: %w", name, err)
	}
	if err := v.ReadInConfig(); err != nil {
		return Plan{}, fmt.Errorf("plan %s: %w", name, err)
	}
	p := Quick()
	p.Name = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	err := v.Unmarshal(&p, func(c *mapstructure.DecoderConfig) {
		c.ErrorUnused = true
		c.WeaklyTypedInput = false
		c.DecodeHook = mapstructure.ComposeDecodeHookFunc(durationHook)
	})
	if err != nil {
		return Plan{}, fmt.Errorf("plan %s: %w", name, err)
	}
	if err := p.Check(); err != nil {
		return Plan{}, fmt.Errorf("plan %s: %w", name, err)
	}
	return p, nil
}

// durationHook reads durations from strings ("5m") only.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[time.Duration]() {
		return data, nil
	}
	s, ok := data.(string)
	if !ok {
		return nil, fmt.Errorf("want a duration such as \"5m\", got %T %v", data, data)
	}
	return time.ParseDuration(s)
}

// fragment is a fragment-geometry candidate.
type fragment struct{ size, slots int }

func parseFragment(s string) (fragment, error) {
	a, b, ok := strings.Cut(strings.ToLower(s), "x")
	if !ok {
		return fragment{}, fmt.Errorf("fragments: %q: want SIZExSLOTS, e.g. 64Kx16", s)
	}
	size, err := transports.ParseSize(strings.ToUpper(a))
	if err != nil {
		return fragment{}, fmt.Errorf("fragments: %q: %w", s, err)
	}
	slots, err := transports.ParseSize(b)
	if err != nil || slots < 1 {
		return fragment{}, fmt.Errorf("fragments: %q: bad slot count", s)
	}
	return fragment{size, slots}, nil
}

// sizes parses one of the plan's size keys, naming it on error.
func sizes(key, s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	v, err := bench.ParseSizes(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return v, nil
}

// ladder is sizes(key, s) keeping every step-th entry (and the last).
func ladder(key, s string, step int) ([]int, error) {
	all, err := sizes(key, s)
	if err != nil || step <= 1 {
		return all, err
	}
	var out []int
	for i := 0; i < len(all); i += step {
		out = append(out, all[i])
	}
	if last := all[len(all)-1]; out[len(out)-1] != last {
		out = append(out, last)
	}
	return out, nil
}

// settleBytes is Settle in bytes, 0 for none.
func (p Plan) settleBytes() (int, error) {
	if p.Settle == "" {
		return 0, nil
	}
	return transports.ParseSize(p.Settle)
}

// Check validates every key, naming the first bad one.
func (p Plan) Check() error {
	switch {
	case p.Budget <= 0:
		return fmt.Errorf("budget: %v: must be positive", p.Budget)
	case p.Rounds < 1:
		return fmt.Errorf("rounds: %d: need at least 1", p.Rounds)
	case p.MaxRound < p.Rounds:
		return fmt.Errorf("max_rounds: %d: below rounds (%d)", p.MaxRound, p.Rounds)
	case p.Reps < 1:
		return fmt.Errorf("reps: %d: need at least 1", p.Reps)
	case p.Window < 1:
		return fmt.Errorf("window: %d: need at least 1", p.Window)
	case p.LadderStep < 1:
		return fmt.Errorf("ladder_step: %d: need at least 1", p.LadderStep)
	case p.Stall <= 0 || p.ProbeDeadline <= 0:
		return fmt.Errorf("stall/probe_deadline: must be positive")
	case len(p.Eager) == 0 || len(p.Fragments) == 0 || len(p.Depths) == 0 || len(p.Transports) == 0:
		return fmt.Errorf("eager, fragments, depths and transports each need a candidate")
	}
	if p.Segment != "memfd" && p.Segment != "posix" {
		return fmt.Errorf("segment: %q: want memfd or posix", p.Segment)
	}
	if _, err := transports.ParseSize(p.RepBytes); err != nil {
		return fmt.Errorf("rep_bytes: %w", err)
	}
	if _, err := p.settleBytes(); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	for _, e := range p.Eager {
		if _, err := transports.ParseSize(e); err != nil {
			return fmt.Errorf("eager: %w", err)
		}
	}
	for _, f := range p.Fragments {
		if _, err := parseFragment(f); err != nil {
			return err
		}
	}
	for _, d := range p.Depths {
		if d < 1 {
			return fmt.Errorf("depths: %d: need at least 1", d)
		}
	}
	for _, t := range p.Transports {
		if _, ok := transportCandidates[t]; !ok {
			return fmt.Errorf("transports: %q: want sm, cma or cma-push", t)
		}
	}
	for _, pu := range p.AllocPurges {
		if pu != "immediate" && pu != "delayed" && pu != "never" {
			return fmt.Errorf("alloc_purges: %q: want immediate, delayed or never", pu)
		}
	}
	for _, c := range p.AllocCaches {
		if _, err := transports.ParseSize(c); err != nil {
			return fmt.Errorf("alloc_caches: %w", err)
		}
	}
	for key, s := range map[string]string{"eager_sizes": p.EagerSizes, "fragment_sizes": p.FragmentSizes,
		"depth_sizes": p.DepthSizes, "confirm_sizes": p.ConfirmSizes, "transport_sizes": p.TransportSizes, "alloc_sizes": p.AllocSizes, "verify_sizes": p.VerifySizes} {
		if _, err := sizes(key, s); err != nil {
			return err
		}
	}
	if s, _ := sizes("transport_sizes", p.TransportSizes); len(s) == 0 {
		return fmt.Errorf("transport_sizes: empty")
	}
	return p.GPU.check()
}

// check validates the GPU keys, naming the first bad one (gpu.KEY).
func (g GPUPlan) check() error {
	if g.GPUs == "" {
		return nil
	}
	if _, err := bench.ParseGPUs(g.GPUs); err != nil {
		return fmt.Errorf("gpu.gpus: %w", err)
	}
	if len(g.Thresholds) == 0 || len(g.Staging) == 0 || len(g.Loads) == 0 {
		return fmt.Errorf("gpu.thresholds, gpu.staging and gpu.loads each need a candidate")
	}
	for _, t := range append(slices.Clone(g.Thresholds), g.PinnedThresholds...) {
		if _, err := transports.ParseSize(t); err != nil {
			return fmt.Errorf("gpu.thresholds/pinned_thresholds: %w", err)
		}
	}
	for _, s := range g.Staging {
		if s != "async" && s != "sync" {
			return fmt.Errorf("gpu.staging: %q: want async or sync", s)
		}
	}
	for _, l := range g.Loads {
		if _, err := bench.ParseKernel(l); err != nil {
			return fmt.Errorf("gpu.loads: %w", err)
		}
	}
	if g.LoadBound <= 0 {
		return fmt.Errorf("gpu.load_bound: %v: must be positive", g.LoadBound)
	}
	for _, m := range g.AllocModes {
		if _, err := gpumem.ParseMode(m); err != nil {
			return fmt.Errorf("gpu.alloc_modes: %w", err)
		}
	}
	for _, c := range g.Copies {
		if c != "ce" && c != "sm" {
			return fmt.Errorf("gpu.copies: %q: want ce or sm", c)
		}
	}
	if len(g.Copies) > 0 {
		if s, _ := sizes("gpu.copy_sizes", g.CopySizes); len(s) == 0 {
			return fmt.Errorf("gpu.copy_sizes: empty, with gpu.copies to weigh")
		}
	}
	for _, n := range g.IPCCaches {
		if n <= 0 {
			return fmt.Errorf("gpu.ipc_caches: %d: want a positive count (0 would keep every mapping, and each keeps a peer's allocation alive)", n)
		}
	}
	if len(g.IPCCaches) > 0 {
		if g.IPCBuffers < 1 {
			return fmt.Errorf("gpu.ipc_buffers: %d: need at least 1 buffer to weigh gpu.ipc_caches with", g.IPCBuffers)
		}
		if s, _ := sizes("gpu.cache_sizes", g.CacheSizes); len(s) == 0 {
			return fmt.Errorf("gpu.cache_sizes: empty, with gpu.ipc_caches to weigh")
		}
	}
	for key, s := range map[string]string{"gpu.sizes": g.Sizes, "gpu.pinned_sizes": g.PinnedSizes, "gpu.copy_sizes": g.CopySizes, "gpu.cache_sizes": g.CacheSizes} {
		if _, err := sizes(key, s); err != nil {
			return err
		}
	}
	if s, _ := sizes("gpu.sizes", g.Sizes); len(s) == 0 {
		return fmt.Errorf("gpu.sizes: empty")
	}
	return nil
}

// transportCandidates are the single transports the transport stage weighs.
var transportCandidates = map[string]struct {
	driver string
	opts   transports.Options
}{
	"sm":       {"sm", nil},
	"cma":      {"cma", transports.Options{"cma.mode": "pull"}},
	"cma-push": {"cma", transports.Options{"cma.mode": "push"}},
}
