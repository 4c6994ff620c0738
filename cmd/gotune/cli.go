package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/output"
	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/progress"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/transports"
	_ "github.com/gotune/gotune/transports/all"
	"github.com/gotune/gotune/transports/auto"
	"github.com/gotune/gotune/transports/cudaipc"
)

// Main runs the CLI with args and returns the process exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(stderr, "gotune:", err)
		if es := (*exitStatus)(nil); errors.As(err, &es) {
			return es.code
		}
		return 1
	}
	return 0
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "gotune",
		Short:         "Communication microbenchmarks and transport tuning for HPC and GPU nodes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newBench(), newDoctor(), newVersion(), newAnchors(), newProbe(), newSweep(), newTune(), newVerify(), newProfile(), newTopo(), newOptions(), newCheck(), newStacks(), newImport(), newCompare(), newReport(), newSelftest(), newNCCL())
	return root
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print gotune's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "gotune %s (%s %s/%s)\n", hostinfo.GotuneVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// benchFlags are the flags shared by commands that measure.
type benchFlags struct {
	transport, pattern, sizes, cpus, format, out, segment string
	profile, settle                                       string
	ranks                                                 string // N or node
	mem, gpus, kernel                                     string
	kernelBound                                           time.Duration
	transportSet                                          bool // --transport given explicitly
	reps, iters, warmup, window, buffers, peers           int
	validate                                              bool
	opts                                                  []string
	timeout, stall                                        time.Duration
	nodes                                                 int
	cluster                                               clusterFlags
}

func (f *benchFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.transport, "transport", "t", "sm", "transport: "+strings.Join(transports.Names(), "|"))
	fl.StringVarP(&f.pattern, "pattern", "p", "latency", "pattern: latency|bw|bibw|msgrate|alloc (bw, allocating every buffer per message: --opt alloc.*); with --ranks: mbw_mr|multi_lat|incast|alltoall; collectives (-t nccl): all_reduce|all_gather|reduce_scatter|broadcast")
	fl.StringVar(&f.ranks, "ranks", "2", "rank processes: N, or node for one per core of the cpuset (more than 2: --pattern mbw_mr, multi_lat, incast or alltoall)")
	fl.StringVarP(&f.sizes, "sizes", "s", "1:4M", "message sizes: a power-of-two ladder MIN:MAX or a list (K/M/G suffixes)")
	fl.IntVar(&f.reps, "reps", bench.DefaultReps, "repetitions of every point")
	fl.IntVar(&f.iters, "iters", 0, "timed iterations per repetition (0: OSU's default for the size)")
	fl.IntVar(&f.warmup, "warmup", 0, "warm-up iterations per repetition (0: OSU's default for the size)")
	fl.IntVar(&f.window, "window", bench.DefaultWindow, "messages in flight per iteration (bw, bibw, msgrate)")
	fl.IntVar(&f.peers, "alltoall-peers", 0, "alltoall above 32 KiB: peers each step exchanges with at once (0: one, pairwise, as MPICH)")
	fl.IntVar(&f.buffers, "buffers", 0, "distinct message buffers per rank, taken in turn (0: one, or one per window slot with --validate): a working set for the transport's caches")
	fl.StringVar(&f.settle, "settle", "4M", "size of one unreported pass of the pattern before the first size, so that no measured size pays for the ranks' first milliseconds; it runs at most that size's built-in iterations (0: none)")
	fl.BoolVar(&f.validate, "validate", false, "fill every payload with a per-iteration pattern and check every byte")
	fl.StringVar(&f.cpus, "cpus", "auto", "CPU per rank (e.g. 0,1), auto, or none")
	fl.StringVar(&f.mem, "mem", "", "message buffers: KIND for both ranks or SRC,DST (rank 0's, rank 1's): host|pinned|device|managed|managed-device|managed-host, or OSU's H|D|M|MD|MH (default host; device with -t nccl)")
	fl.StringVar(&f.gpus, "gpus", "", "GPU ordinals, e.g. 0,1: rank r uses the (r mod n)-th (default: rank mod the device count); also sets --opt "+cudaipc.KeyGPUs)
	fl.StringVar(&f.kernel, "kernel", "none", "GPU load on each rank's GPU during every timed repetition: none|partial|full|FRACTION (needs a GPU --mem or --gpus)")
	fl.DurationVar(&f.kernelBound, "kernel-bound", 0, "time bound of each launch of the --kernel load (default 1m): a pass that waits for the kernel ends when it does, and its point counts as stalled (load_late)")
	fl.StringVarP(&f.format, "format", "f", "table", "output: "+strings.Join(output.Formats, "|"))
	fl.StringVarP(&f.out, "out", "o", "", "append the output to FILE instead of printing it")
	fl.StringArrayVar(&f.opts, "opt", nil, "transport option KEY=VALUE (repeatable; see gotune doctor)")
	fl.StringVar(&f.profile, "profile", "", "route every message by this profile's decisions (transport auto)")
	fl.StringVar(&f.segment, "segment", launch.Memfd, "shared segment backend: memfd|posix")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Minute, "kill the ranks and fail after this long")
	fl.DurationVar(&f.stall, "stall", bench.DefaultStall, "a rank that finishes no repetition for this long is reported with its stacks and killed")
	fl.IntVar(&f.nodes, "nodes", 0, "nodes the pair spans: 2 measures an inter-node pair (needs --launcher mpirun|srun), 1 a pair on rank 0's node (default: 2 when the job has several nodes and the transport crosses nodes, else 1)")
	f.cluster.register(cmd)
}

// join joins the launcher's job (--launcher) and settles how many nodes
// the pair spans. serve reports a process that served launcher rank 0 and
// has nothing more to do.
func (f *benchFlags) join(ctx context.Context, cmd *cobra.Command, spec *bench.Spec) (j joined, err error) {
	if j, err = f.cluster.join(ctx, cmd); err != nil || j.serve {
		return j, err
	}
	if !cmd.Flags().Changed("nodes") {
		spec.Nodes = 1
		if d, err := transports.Lookup(spec.Transport); err == nil && !d.NodeLocal && j.nodes() > 1 && !spec.Pattern.MultiRank() {
			spec.Nodes = 2
		}
	}
	if err := spec.Normalize(); err != nil {
		j.close()
		return joined{}, err
	}
	return j, nil
}

func (f *benchFlags) spec(notes io.Writer) (bench.Spec, error) {
	pattern, err := bench.ParsePattern(f.pattern)
	if err != nil {
		return bench.Spec{}, fmt.Errorf("--pattern: %w", err)
	}
	sizes, err := bench.ParseSizes(f.sizes)
	if err != nil {
		return bench.Spec{}, fmt.Errorf("--sizes: %w", err)
	}
	opts, err := parseOpts(f.opts)
	if err != nil {
		return bench.Spec{}, err
	}
	settle, err := transports.ParseSize(f.settle)
	if err != nil {
		return bench.Spec{}, fmt.Errorf("--settle: %w", err)
	}
	ranks, err := parseRanks(f.ranks, pattern)
	if err != nil {
		return bench.Spec{}, err
	}
	cpus, err := parseCPUs(f.cpus)
	if err != nil {
		return bench.Spec{}, err
	}
	if pattern.MultiRank() {
		if cpus, err = multiRankCPUs(f.cpus, cpus, ranks); err != nil {
			return bench.Spec{}, err
		}
	}
	mem, gpus, load, err := f.gpuSpec()
	if err != nil {
		return bench.Spec{}, err
	}
	transport := f.transport
	if f.profile != "" && transport == "cudaipc" {
		// A GPU profile's section sets cudaipc's options; --opt still wins.
		p, err := profile.Load(f.profile)
		if err != nil {
			return bench.Spec{}, fmt.Errorf("--profile: %w", err)
		}
		if p.GPU == nil {
			return bench.Spec{}, fmt.Errorf("--profile %s: no gpu section (run gotune sweep --plan gpu on a GPU node)", f.profile)
		}
		opts = cudaipc.ProfileOptions(p.GPU).With(opts)
	} else if f.profile != "" || transport == "auto" {
		if transport != "auto" && f.transportSet {
			return bench.Spec{}, fmt.Errorf("--profile routes by the profile: use --transport auto or leave --transport out (got %q)", transport)
		}
		if f.profile == "" {
			found, _, host, err := findProfile(profile.CatalogueDir())
			if err != nil {
				return bench.Spec{}, fmt.Errorf("--transport auto without --profile: %w (run from the repository root, set $%s, or give --profile FILE)", err, profile.CatalogueEnv)
			}
			if len(found) == 0 {
				return bench.Spec{}, fmt.Errorf("--transport auto without --profile: %w", errNoCatalogueEntry(profile.CatalogueDir(), host))
			}
			f.profile = found[0].Path
			fmt.Fprintf(notes, "gotune: --transport auto: profile %s, the catalogue's entry %s for this host (%s, %s, %d cores)\n", f.profile, found[0].Name, host.Name, host.CPUModel, host.Cores)
		}
		p, err := profile.Load(f.profile)
		if err != nil {
			return bench.Spec{}, fmt.Errorf("--profile: %w", err)
		}
		abs, err := filepath.Abs(f.profile)
		if err != nil {
			return bench.Spec{}, fmt.Errorf("--profile: %w", err)
		}
		opts, transport = opts.With(auto.LaunchOptions(abs, p)), "auto"
	}
	s := bench.Spec{Transport: transport, Options: opts, Pattern: pattern, Sizes: sizes, Reps: f.reps,
		Iters: f.iters, Warmup: f.warmup, Window: f.window, Validate: f.validate, Buffers: f.buffers, Peers: f.peers, CPUs: cpus, Backend: f.segment,
		Mem: mem, GPUs: gpus, GPULoad: load, GPULoadBound: f.kernelBound, Settle: settle, Nodes: f.nodes, Ranks: ranks}
	if err := s.Normalize(); err != nil {
		return s, err
	}
	return s, nil
}

// gpuSpec reads --mem, --gpus and --kernel ("" reads as the default; no
// memory kinds without --mem).
func (f *benchFlags) gpuSpec() ([]cuda.MemKind, []int, float64, error) {
	kernel := f.kernel
	if kernel == "" {
		kernel = "none"
	}
	var kinds []cuda.MemKind // none given: the transport's default (bench.Spec.Normalize)
	if f.mem != "" {
		var err error
		if kinds, err = bench.ParseMem(f.mem); err != nil {
			return nil, nil, 0, fmt.Errorf("--mem: %w", err)
		}
	}
	gpus, err := bench.ParseGPUs(f.gpus)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("--gpus: %w", err)
	}
	load, err := bench.ParseKernel(kernel)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("--kernel: %w", err)
	}
	if load > 0 && len(gpus) == 0 && len(kinds) > 0 && !slices.ContainsFunc(kinds, func(k cuda.MemKind) bool { return k != cuda.MemHost }) {
		return nil, nil, 0, fmt.Errorf("--kernel %s: the load kernel runs on the ranks' GPUs, and with --mem host on both ranks and no --gpus the ranks have none: add --gpus (e.g. --gpus 0) or a GPU --mem", kernel)
	}
	return kinds, gpus, load, nil
}

func parseOpts(kvs []string) (transports.Options, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	o := transports.Options{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--opt %q: want KEY=VALUE", kv)
		}
		o[k] = v
	}
	return o, nil
}

func parseCPUs(s string) ([]int, error) {
	switch s {
	case "auto":
		return bench.DefaultCPUs(2), nil
	case "none", "":
		return nil, nil
	}
	var cpus []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--cpus %q: want auto, none or a list like 0,1", s)
		}
		cpus = append(cpus, n)
	}
	if len(cpus) < 2 {
		return nil, fmt.Errorf("--cpus %q: need a CPU for each of the 2 ranks", s)
	}
	return cpus, nil
}

// resultsTo returns where results go: stdout, or FILE opened for appending.
func resultsTo(cmd *cobra.Command, path string) (io.Writer, func() error, error) {
	if path == "" {
		return cmd.OutOrStdout(), func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("--out: %w", err)
	}
	return f, f.Close, nil
}

// jobContext is cancelled by SIGINT/SIGTERM or the timeout.
func jobContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if timeout <= 0 {
		return ctx, stop
	}
	tctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("timed out after %v (--timeout)", timeout))
	return tctx, func() { cancel(); stop() }
}

func newBench() *cobra.Command {
	var f benchFlags
	var floor floorFlag
	var quiet bool
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure one transport between two fresh rank processes",
		Example: `  gotune bench --transport sm --pattern latency --sizes 8 --format osu
  gotune bench --transport cma --pattern bw --sizes 4K:16M --format osu
  gotune bench -t sm -p bw --opt sm.frag=64K --opt sm.frags=4 --format bench --out sm.txt
  gotune bench -t sm -p bw --mem pinned,managed --gpus 0,1 --kernel partial --format osu`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(output.Formats, f.format) {
				return fmt.Errorf("--format %q: want one of %s", f.format, strings.Join(output.Formats, ", "))
			}
			f.transportSet = cmd.Flags().Changed("transport")
			spec, err := f.spec(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := floor.check(spec, f.format); err != nil {
				return err
			}
			ctx, cancel := jobContext(f.timeout)
			defer cancel()
			j, err := f.join(ctx, cmd, &spec)
			if err != nil || j.serve {
				return err
			}
			defer j.close()
			var opts []bench.RunOption
			stderr, closeMeter := cmd.ErrOrStderr(), func() {}
			if !quiet {
				if progress.IsTerminal(stderr) { // a bar of sizes under the lines
					m := progress.New(stderr, progress.Unit("sizes"))
					stderr, closeMeter = m.Writer(), m.Close
					opts = append(opts, bench.WithMeter(m))
				}
				opts = append(opts, bench.WithProgress(stderr))
			}
			defer closeMeter()
			res, err := bench.Run(ctx, spec, f.stall, launch.Hooks{Stderr: stderr}, opts...)
			closeMeter() // before the results, which may go to the same terminal
			if err != nil {
				return err
			}
			w, closeOut, err := resultsTo(cmd, f.out)
			if err != nil {
				return err
			}
			if err := output.Write(w, f.format, []bench.Result{res}); err != nil {
				closeOut()
				return err
			}
			if err := floor.write(w, f.format, res); err != nil {
				closeOut()
				return err
			}
			return closeOut()
		},
	}
	f.register(cmd)
	floor.register(cmd)
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr (lines saying what the run is doing, at most one a second, none for a run under half a second; on a terminal also a bar of the sizes measured)")
	return cmd
}
