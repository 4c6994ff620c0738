package sweep

import (
	"fmt"
	"maps"
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
	"github.com/gotune/gotune/transports/cma"
	"github.com/gotune/gotune/transports/cudaipc"
	"github.com/gotune/gotune/transports/gpumem"
	"github.com/gotune/gotune/transports/knem"
	"github.com/gotune/gotune/transports/xpmem"
)

// Plan says what a sweep measures and how hard it tries. A plan file sets
// any subset of the keys (the json names); LoadPlan decodes it once into
// these typed, checked values. The help tags are the keys' meaning in
// docs/options.md, generated from this type.
type Plan struct {
	Name     string        `json:"name" mapstructure:"name" help:"the plan's name (a file's: its base name)"`
	Budget   time.Duration `json:"budget" mapstructure:"budget" help:"time the whole sweep may take; trials beyond it are skipped and recorded as such"`
	Rounds   int           `json:"rounds" mapstructure:"rounds" help:"interleaved rounds every candidate gets"`
	MaxRound int           `json:"max_rounds" mapstructure:"max_rounds" help:"rounds an unsettled comparison may grow to"`
	Reps     int           `json:"reps" mapstructure:"reps" help:"repetitions per size per trial"`
	RepBytes Size          `json:"rep_bytes" mapstructure:"rep_bytes" help:"payload per repetition (bench's loop count follows from it)"`
	Window   int           `json:"window" mapstructure:"window" help:"messages in flight per bandwidth window (OSU's 64)"`
	Stall    time.Duration `json:"stall" mapstructure:"stall" help:"watchdog deadline of a measuring trial: no progress for this long kills it"`
	Segment  string        `json:"segment" mapstructure:"segment" help:"shared segment backend: memfd or posix"`
	// Settle 0 means none (runs made before it existed).
	Settle Size `json:"settle,omitempty" mapstructure:"settle" help:"size of the discarded point, in the trial's own pattern, that opens every trial (0: none)"`

	Eager         []Size          `json:"eager" mapstructure:"eager" help:"eager-limit candidates"`
	EagerSizes    SizeList        `json:"eager_sizes" mapstructure:"eager_sizes" help:"sizes the eager stage measures (latency and bandwidth)"`
	Fragments     []Fragment      `json:"fragments" mapstructure:"fragments" help:"fragment geometry candidates, SIZExSLOTS"`
	FragmentSizes SizeList        `json:"fragment_sizes" mapstructure:"fragment_sizes" help:"sizes the fragment stage measures (bandwidth)"`
	Depths        []int           `json:"depths" mapstructure:"depths" help:"FIFO depth candidates (cells per channel)"`
	DepthSizes    SizeList        `json:"depth_sizes" mapstructure:"depth_sizes" help:"sizes the depth stage measures (message rate, bandwidth), besides the chosen eager limit and twice it"`
	Parks         []time.Duration `json:"parks,omitempty" mapstructure:"parks" help:"sm.park candidates (durations, \"0s\" for none) the park stage weighs with alltoall when the geometry ranks are more than 2; the shortest that loses nowhere is chosen (empty: no park stage, the built-in stands)"`
	ParkSizes     SizeList        `json:"park_sizes,omitempty" mapstructure:"park_sizes" help:"alltoall sizes of the park stage"`
	ConfirmSizes  SizeList        `json:"confirm_sizes" mapstructure:"confirm_sizes" help:"sizes where the chosen channel parameters are weighed together against the built-in ones (empty: no confirmation)"`
	Transports    []string        `json:"transports" mapstructure:"transports" help:"single transports the transport stage weighs: sm, cma (pull), cma-push, cma-split, knem, xpmem (a kernel module's transport is weighed where its device is present)"`
	// TransportSizes is the fine ladder; the coarse one keeps every
	// LadderStep-th size.
	TransportSizes SizeList `json:"transport_sizes" mapstructure:"transport_sizes" help:"sizes of the transport stage's ladder"`
	LadderStep     int      `json:"ladder_step" mapstructure:"ladder_step" help:"the coarse ladder measures every n-th size of transport_sizes"`
	Bisect         bool     `json:"bisect" mapstructure:"bisect" help:"measure the sizes between neighbours with different winners until every crossover is known to a doubling"`

	AllocPurges []string `json:"alloc_purges" mapstructure:"alloc_purges" help:"host allocator purge policies to weigh: immediate, delayed, never (empty: no allocator stages)"`
	AllocTHP    []bool   `json:"alloc_thp" mapstructure:"alloc_thp" help:"transparent huge pages settings to weigh"`
	AllocCaches []Size   `json:"alloc_caches" mapstructure:"alloc_caches" help:"host buffer cache sizes to weigh"`
	AllocSizes  SizeList `json:"alloc_sizes" mapstructure:"alloc_sizes" help:"sizes of the allocate-per-message pattern"`
	// AllocRepBytes 0 means rep_bytes (runs made before it existed).
	AllocRepBytes Size `json:"alloc_rep_bytes,omitempty" mapstructure:"alloc_rep_bytes" help:"payload per repetition of the allocator stages (0: rep_bytes); their candidates differ by factors, and a purge per message costs a page fault per page, so fewer bytes decide them"`
	AllocWindow   int  `json:"alloc_window,omitempty" mapstructure:"alloc_window" help:"messages in flight per window of the allocator stages (0: window): every iteration takes at least a window, and a window of 64 fresh 4 MiB buffers is 256 MiB of page faults"`

	Probes        []string      `json:"probes" mapstructure:"probes" help:"hazard probes of the safety phase (H1-H8)"`
	ProbeDeadline time.Duration `json:"probe_deadline" mapstructure:"probe_deadline" help:"watchdog deadline of a probe"`

	VerifySizes    SizeList `json:"verify_sizes" mapstructure:"verify_sizes" help:"sizes where the emitted profile is measured beside each single transport (empty: no verification)"`
	VerifyRounds   int      `json:"verify_rounds" mapstructure:"verify_rounds" help:"interleaved rounds of the verification"`
	FootprintRanks []int    `json:"footprint_ranks" mapstructure:"footprint_ranks" help:"ranks per node at which the summary reports the channels' memory footprint, after ranks_per_node"`
	// RanksPerNode 0 means one rank per core of the node.
	RanksPerNode int `json:"ranks_per_node,omitempty" mapstructure:"ranks_per_node" help:"ranks per node the profile will serve (0: one per core): channel geometries whose shared memory at that count exceeds the node's share are not weighed, and the footprint is reported there first"`
	// GeometryRanks 0 means ranks_per_node, at most the cores of the
	// sweep's cpuset, made even.
	GeometryRanks int `json:"geometry_ranks,omitempty" mapstructure:"geometry_ranks" help:"ranks at which the fragment stage also weighs mbw_mr and the depth stage alltoall (0: ranks_per_node, at most the cpuset's cores, made even; below 4 neither: a pair is what the stages measure anyway)"`

	GPU GPUPlan `json:"gpu" mapstructure:"gpu"`

	Internode InternodePlan `json:"internode" mapstructure:"internode"`

	Stacks      []string `json:"stacks,omitempty" mapstructure:"stacks" help:"MPI stacks to tune through themselves, each with its own launcher and a native file loaded as users load it: openmpi, mpich, ucx, mimalloc (gotune sweep --stack)"`
	StackRounds int      `json:"stack_rounds,omitempty" mapstructure:"stack_rounds" help:"interleaved rounds per stack parameter and for the tuned file's confirmation against the defaults"`
	StackIters  int      `json:"stack_iters,omitempty" mapstructure:"stack_iters" help:"iterations per size in a stack's runs (0: OSU's counts)"`
}

// GPUPlan is the GPU part of a sweep (all of it skipped when GPUs is
// empty): the cudaipc path for device messages (staging mode × the size
// from which they go by CUDA IPC), measured with each load level of the
// concurrent kernel, a candidate that stalls beside a kernel is out; the
// pinned-host threshold; copy engines or SMs for the single copy, how its
// completion reaches both ranks, the relay block for small copies, and the
// IPC mapping cache, each weighed at every load level too; and the GPU
// allocator mode from probe H2's verdicts.
type GPUPlan struct {
	GPUs             string        `json:"gpus" mapstructure:"gpus" help:"the ranks' devices, e.g. 0,1 (empty: no GPU stages)"`
	Thresholds       []Size        `json:"thresholds" mapstructure:"thresholds" help:"cudaipc.threshold candidates"`
	Staging          []string      `json:"staging" mapstructure:"staging" help:"cudaipc.staging candidates: async, sync (screened by probe H4 first)"`
	Loads            []Load        `json:"loads" mapstructure:"loads" help:"load levels of the concurrent kernel: none, partial, full, or a fraction of the SMs"`
	LoadBound        time.Duration `json:"load_bound" mapstructure:"load_bound" help:"how long each launch of the load kernel runs"`
	Sizes            SizeList      `json:"sizes" mapstructure:"sizes" help:"device-to-device latency sizes of the path stage"`
	PinnedThresholds []Size        `json:"pinned_thresholds" mapstructure:"pinned_thresholds" help:"cudaipc.pinned-threshold candidates"`
	PinnedSizes      SizeList      `json:"pinned_sizes" mapstructure:"pinned_sizes" help:"pinned-to-device bandwidth sizes"`
	AllocModes       []string      `json:"alloc_modes" mapstructure:"alloc_modes" help:"gpu.alloc candidates, weighed by probe H2: plain, worker, pool"`
	Copies           []string      `json:"copies" mapstructure:"copies" help:"cudaipc.copy candidates: ce, sm"`
	CopySizes        SizeList      `json:"copy_sizes" mapstructure:"copy_sizes" help:"device-to-device latency sizes for the copy stage"`
	Completions      []string      `json:"completions" mapstructure:"completions" help:"cudaipc.completion candidates: event, flag, sync"`
	CompletionSizes  SizeList      `json:"completion_sizes" mapstructure:"completion_sizes" help:"device-to-device bandwidth sizes for the completion stage"`
	Relays           []Size        `json:"relays" mapstructure:"relays" help:"cudaipc.relay candidates: the largest copy the relay block moves (0: no relay)"`
	RelaySizes       SizeList      `json:"relay_sizes" mapstructure:"relay_sizes" help:"device-to-device latency sizes for the relay stage"`
	IPCCaches        []int         `json:"ipc_caches" mapstructure:"ipc_caches" help:"cudaipc.cache candidates (positive)"`
	IPCBuffers       int           `json:"ipc_buffers" mapstructure:"ipc_buffers" help:"device buffers per rank taken in turn while weighing the cache"`
	CacheSizes       SizeList      `json:"cache_sizes" mapstructure:"cache_sizes" help:"latency sizes for the cache stage"`
}

// GPU is the built-in plan of `gotune sweep --plan gpu`: the host stages
// with one candidate each (they set what the GPU stages build on), then
// the GPU stages and the probes H2 and H4, on GPUs 0 and 1.
func GPU() Plan {
	p := Quick()
	p.Name, p.Budget, p.Rounds, p.MaxRound = "gpu", 4*time.Minute+30*time.Second, 2, 5
	p.Eager, p.Fragments, p.Depths, p.Transports = parseText[Size]("4K"), parseText[Fragment]("64Kx16"), []int{64}, []string{"sm"}
	p.TransportSizes, p.Bisect, p.ConfirmSizes = mustSizes("64K"), false, SizeList{}
	p.Parks, p.ParkSizes = nil, SizeList{}
	p.AllocPurges, p.AllocTHP, p.AllocCaches = []string{"immediate"}, []bool{false}, parseText[Size]("64M")
	p.Probes, p.ProbeDeadline = []string{"H2", "H4"}, 3*time.Second
	p.VerifySizes = SizeList{}
	p.GPU = GPUPlan{
		GPUs: "0,1", Thresholds: parseText[Size]("0", "64K", "1G"), Staging: []string{"async", "sync"},
		Loads: parseText[Load]("none", "partial", "full"), LoadBound: time.Second, Sizes: mustSizes("8,64K,1M"),
		PinnedThresholds: parseText[Size]("256K", "4M", "1G"), PinnedSizes: mustSizes("1M,16M"),
		AllocModes: []string{"plain", "worker", "pool"},
		Copies:     []string{"ce", "sm"}, CopySizes: mustSizes("1M,16M"),
		Completions: []string{"event", "flag"}, CompletionSizes: mustSizes("64K,1M"),
		Relays: parseText[Size]("0", "64K"), RelaySizes: mustSizes("8,4K"),
		IPCCaches: []int{4, 16, 64}, IPCBuffers: 32, CacheSizes: mustSizes("1M"),
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
		Rounds: 3, MaxRound: 8, Reps: 3, RepBytes: 64 << 20, Window: bench.DefaultWindow, Stall: 30 * time.Second,
		Segment: "memfd", Settle: 4 << 20,
		Eager: parseText[Size]("1K", "2K", "4K", "8K"), EagerSizes: mustSizes("256:16K"),
		Fragments:     parseText[Fragment]("32Kx8", "64Kx16", "64Kx32", "64Kx64", "128Kx32"),
		FragmentSizes: mustSizes("16K:16M"),
		Depths:        []int{8, 16, 32, 64, 128}, DepthSizes: mustSizes("8,512,1K,4K,32K"),
		Parks: []time.Duration{0, 50 * time.Microsecond, 500 * time.Microsecond}, ParkSizes: mustSizes("64K,256K"),
		ConfirmSizes: mustSizes("1:16M"),
		Transports:   []string{"sm", "cma", "cma-push", "cma-split", "knem", "xpmem"}, TransportSizes: mustSizes("8K:16M"), LadderStep: 2, Bisect: true,
		AllocPurges: []string{"immediate", "delayed", "never"}, AllocTHP: []bool{false, true},
		AllocCaches: parseText[Size]("8M", "64M", "256M"), AllocSizes: mustSizes("64K,1M,4M"), AllocRepBytes: 8 << 20, AllocWindow: 8,
		Probes: []string{"H1", "H3", "H5", "H6", "H8"}, ProbeDeadline: 2 * time.Second,
		VerifySizes: mustSizes("1:16M"), VerifyRounds: 4,
		FootprintRanks: []int{2, 8, 64},
		StackRounds:    5,
		Internode: InternodePlan{Transports: []string{"tcp", "ib"}, Eager: parseText[Size]("16K", "64K", "256K"),
			Conns: []int{1, 2, 4}, Rendezvous: []string{"read", "write"}, Credits: []int{16, 64},
			SocketBufs: parseText[Size]("0", "4M"), Sizes: mustSizes("8,4K,64K,1M,16M")},
	}
}

// Full measures more candidates, sizes and rounds; budget 30 minutes.
func Full() Plan {
	p := Quick()
	p.Name, p.Budget = "full", 30*time.Minute
	p.Rounds, p.MaxRound, p.Reps, p.RepBytes = 7, 12, 5, 256<<20
	p.Eager = parseText[Size]("512", "1K", "2K", "4K", "8K", "16K")
	p.EagerSizes = mustSizes("64:32K")
	p.Fragments = parseText[Fragment]("16Kx16", "32Kx8", "32Kx32", "64Kx4", "64Kx16", "64Kx32", "64Kx64", "128Kx8", "128Kx32", "256Kx16")
	p.FragmentSizes = mustSizes("16K:16M")
	p.Depths = []int{4, 8, 16, 32, 64, 128, 256}
	p.DepthSizes = mustSizes("8,64,512,1K,4K,8K,32K")
	p.Parks = []time.Duration{0, 20 * time.Microsecond, 50 * time.Microsecond, 200 * time.Microsecond, time.Millisecond}
	p.ParkSizes = mustSizes("16K,64K,256K")
	p.Transports = []string{"sm", "cma", "cma-push", "cma-split", "knem", "xpmem"}
	p.TransportSizes, p.LadderStep = mustSizes("4K:64M"), 2
	p.AllocCaches = parseText[Size]("0", "8M", "64M", "256M", "1G")
	p.AllocSizes = mustSizes("16K:16M")
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
		c.DecodeHook = mapstructure.ComposeDecodeHookFunc(durationHook, mapstructure.TextUnmarshallerHookFunc())
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

// window is the messages in flight per window of a trial of pattern.
func (p Plan) window(pattern bench.Pattern) int {
	if pattern == allocPattern && p.AllocWindow > 0 {
		return p.AllocWindow
	}
	return p.Window
}

// repBytes is the payload per repetition of a trial of pattern.
func (p Plan) repBytes(pattern bench.Pattern) int {
	if pattern == allocPattern && p.AllocRepBytes > 0 {
		return int(p.AllocRepBytes)
	}
	return int(p.RepBytes)
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
	case p.AllocWindow < 0 || p.AllocRepBytes < 0:
		return fmt.Errorf("alloc_window %d, alloc_rep_bytes %d: want 0 (the plan's window, rep_bytes) or more", p.AllocWindow, p.AllocRepBytes)
	case p.RanksPerNode < 0 || p.RanksPerNode == 1:
		return fmt.Errorf("ranks_per_node: %d: want 0 (one per core) or at least 2", p.RanksPerNode)
	case p.GeometryRanks < 0 || p.GeometryRanks%2 != 0:
		return fmt.Errorf("geometry_ranks: %d: want 0 (ranks_per_node) or an even number (mbw_mr pairs the ranks)", p.GeometryRanks)
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
	for _, d := range p.Depths {
		if d < 1 {
			return fmt.Errorf("depths: %d: need at least 1", d)
		}
	}
	for _, d := range p.Parks {
		if d < 0 {
			return fmt.Errorf("parks: %v: want 0s (park at once) or more", d)
		}
	}
	if len(p.Parks) > 0 && p.ParkSizes.Empty() {
		return fmt.Errorf("park_sizes: empty, with parks to weigh")
	}
	for _, t := range p.Transports {
		if _, ok := transportCandidates[t]; !ok {
			return fmt.Errorf("transports: %q: want one of %s", t, strings.Join(TransportCandidateNames(), ", "))
		}
	}
	for _, pu := range p.AllocPurges {
		if pu != "immediate" && pu != "delayed" && pu != "never" {
			return fmt.Errorf("alloc_purges: %q: want immediate, delayed or never", pu)
		}
	}
	if p.TransportSizes.Empty() {
		return fmt.Errorf("transport_sizes: empty")
	}
	if err := p.Internode.Check(); err != nil {
		return err
	}
	for _, s := range p.Stacks {
		if _, ok := adapters[s]; !ok {
			return fmt.Errorf("stacks: %q: want one of %s", s, strings.Join(StackNames(), ", "))
		}
	}
	if len(p.Stacks) > 0 && p.StackRounds < 4 {
		return fmt.Errorf("stack_rounds: %d: need at least 4 (a U test at alpha 0.05 settles nothing on fewer rounds a side)", p.StackRounds)
	}
	return p.GPU.check()
}

// check validates the GPU keys, naming the first bad one (gpu.KEY).
func (g GPUPlan) check() error {
	if g.GPUs == "" {
		return nil
	}
	gpus, err := bench.ParseGPUs(g.GPUs)
	if err != nil {
		return fmt.Errorf("gpu.gpus: %w", err)
	}
	if len(g.Thresholds) == 0 || len(g.Staging) == 0 || len(g.Loads) == 0 {
		return fmt.Errorf("gpu.thresholds, gpu.staging and gpu.loads each need a candidate")
	}
	// The GPU stages' two ranks take gpus[0] and gpus[1 mod len] (bench.GPUFor).
	if shared := gpus[0] == gpus[1%len(gpus)]; shared && slices.ContainsFunc(g.Loads, func(l Load) bool { return l.Fraction > 0 }) {
		return fmt.Errorf("gpu.gpus: %q puts both ranks on GPU %d, and gpu.loads runs the load kernel there beside device buffers, which a shared GPU does not measure (bench refuses it): name two GPUs, or loads: [none]", g.GPUs, gpus[0])
	}
	for _, s := range g.Staging {
		if s != "async" && s != "sync" {
			return fmt.Errorf("gpu.staging: %q: want async or sync", s)
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
		if g.CopySizes.Empty() {
			return fmt.Errorf("gpu.copy_sizes: empty, with gpu.copies to weigh")
		}
	}
	for _, c := range g.Completions {
		if !slices.Contains(cudaipc.Completions, c) {
			return fmt.Errorf("gpu.completions: %q: want one of %s", c, strings.Join(cudaipc.Completions, ", "))
		}
	}
	if len(g.Completions) > 0 && g.CompletionSizes.Empty() {
		return fmt.Errorf("gpu.completion_sizes: empty, with gpu.completions to weigh")
	}
	if len(g.Relays) > 0 && g.RelaySizes.Empty() {
		return fmt.Errorf("gpu.relay_sizes: empty, with gpu.relays to weigh")
	}
	if len(g.Relays) > 0 && !slices.Contains(g.Relays, 0) {
		return fmt.Errorf("gpu.relays: %v without 0: where the transport refuses a relay (ranks sharing a GPU) no candidate would be left", g.Relays)
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
		if g.CacheSizes.Empty() {
			return fmt.Errorf("gpu.cache_sizes: empty, with gpu.ipc_caches to weigh")
		}
	}
	if g.Sizes.Empty() {
		return fmt.Errorf("gpu.sizes: empty")
	}
	return nil
}

// transportCandidates are the single transports the transport stage weighs.
var transportCandidates = map[string]struct {
	driver string
	opts   transports.Options
}{
	"sm":        {"sm", nil},
	"cma":       {"cma", transports.Options{cma.KeyMode: "pull"}},
	"cma-push":  {"cma", transports.Options{cma.KeyMode: "push"}},
	"cma-split": {"cma", transports.Options{cma.KeyMode: "split"}},
	"knem":      {"knem", transports.Options{knem.KeyMode: "pull"}},
	"xpmem":     {"xpmem", transports.Options{xpmem.KeyMode: "pull"}},
}

// TransportCandidateNames lists the names a plan's transports may use.
func TransportCandidateNames() []string {
	names := slices.Collect(maps.Keys(transportCandidates))
	slices.Sort(names)
	return names
}

// singleCopy says whether a driver moves rendezvous messages by one copy
// between address spaces: a profile's rendezvous ranges name it.
func singleCopy(driver string) bool { return driver == "cma" || driver == "knem" || driver == "xpmem" }
