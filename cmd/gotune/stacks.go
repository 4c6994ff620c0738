package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/compare"
	"github.com/gotune/gotune/bench/mpistack"
	"github.com/gotune/gotune/bench/torch"
	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/auto"
	"github.com/gotune/gotune/tuner/stack"
)

// stacksMeasured are the stacks gotune stacks puts beside gotune's sm: the
// MPI paths (mimalloc is an allocator, weighed on its own pattern).
var stacksMeasured = []string{"openmpi", "mpich", "ucx"}

func newStacks() *cobra.Command {
	var (
		ladders                            interleaved
		profilePath, format, outDir, ranks string
		referenceFlag                      string
		only, osuDirs, singles             []string
		gpu                                bool
		torchScript                        string
	)
	cmd := &cobra.Command{
		Use:   "stacks",
		Short: "Measure gotune sm, Open MPI, MPICH and UCX (defaults, and tuned files from a profile) on this node, interleaved, in one comparison",
		Long: `stacks runs the same latency and bandwidth ladder through gotune's sm
transport and through every MPI stack installed here, each as its own launcher
and benchmark run it: Open MPI and MPICH with gotune's reference benchmark built
by their compiler wrappers, UCX with ucx_perftest. With --profile, gotune's own
runtime routed by the profile's decisions (transport auto) joins gotune sm, and
each stack the profile has decisions for (its stacks: section, from gotune sweep
--stack) is measured twice: with its defaults, and with the tuned values loaded
as its native file. --transports adds gotune's other single transports (cma,
xpmem, knem) beside sm, to show where one of them already reaches a stack. Every round runs each configuration once, back to back, in a
rotating order, so that a machine whose speed drifts is compared with itself.

With --ranks N (an even N, or node) every configuration runs alltoall and then
mbw_mr at N ranks instead, one rank per core: gotune's own patterns beside the
reference benchmark's through Open MPI and MPICH (ucx_perftest measures one
pair, so UCX is left out).

With --osu DIR (repeatable) the OSU Micro-Benchmarks installed there join
every round: osu_latency, osu_bw, osu_mbw_mr and osu_alltoall as the pattern
needs, run through the launcher of the MPI library they link (read from their
ELF headers) with that stack's defaults, labelled "osu openmpi" or "osu mpich",
and, with --profile, again with the profile's tuned values for that library
loaded as a user loads its native file ("osu openmpi tuned").
Their rows check the reference benchmark against OSU's own figures on the
same node, in the same rounds.

With --gpu the run is between the node's first two GPUs instead, device
buffers: gotune cudaipc (the reference), NCCL through gotune's nccl transport
with its defaults and, with --profile, with the profile's tuned NCCL values,
and PyTorch's NCCL send/recv as scripts/gpu/baselines.py measures it (found in
the working directory or beside the binary's checkout, or --torch-script;
left out with a note where python3 cannot import torch).

The comparison takes gotune sm (--gpu: gotune cudaipc) as the reference, or
the column --reference names (say "gotune auto"): a ratio > 1 means that side
is better. A stack that is not installed is left out with a note. On a terminal a bar
per pattern counts the runs done of those planned; elsewhere plain lines say so
every 15 s; --quiet shows neither.`,
		Example: `  gotune stacks
  gotune stacks --profile /data/node1/RUN/profile.yaml --reps 8 --out /tmp/stacks
  gotune stacks --ranks node --bw-sizes 8,4K,64K,1M --alltoall-sizes 1K,64K
  gotune stacks --osu /opt/osu-7.4-openmpi --stack openmpi
  gotune stacks --gpu --profile /data/gpu1/RUN/profile.yaml --bw-sizes 1K:256M`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(compare.Formats, format) {
				return fmt.Errorf("--format %q: want one of %s", format, strings.Join(compare.Formats, ", "))
			}
			for _, s := range only {
				if !slices.Contains(stacksMeasured, s) {
					return fmt.Errorf("--stack %q: want one of %s", s, strings.Join(stacksMeasured, ", "))
				}
			}
			if gpu && (len(only) > 0 || len(osuDirs) > 0 || ranks != "2" || len(singles) > 0) {
				return errors.New("--gpu measures one pair of GPUs through gotune, NCCL and PyTorch: --stack, --osu, --ranks and --transports do not apply")
			}
			for _, t := range singles {
				if _, err := transports.Lookup(t); err != nil {
					return fmt.Errorf("--transports %q: %w", t, err)
				}
				if t == "sm" || t == "auto" {
					return fmt.Errorf("--transports %q: gotune sm is always measured (the reference), and auto with --profile", t)
				}
			}
			if len(only) == 0 {
				only = stacksMeasured
			}
			if err := ladders.parseSettle(); err != nil {
				return err
			}
			n, err := parseRanks(ranks, bench.MultiBandwidth)
			if err != nil {
				return err
			}
			ladders.ranks = n
			if ladders.ranks > 2 && ladders.ranks%2 != 0 {
				return fmt.Errorf("--ranks %d: mbw_mr pairs the ranks, so give an even number", ladders.ranks)
			}
			var prof *profile.Profile
			if profilePath != "" {
				abs, err := filepath.Abs(profilePath) // the ranks load it by this path
				if err != nil {
					return err
				}
				if prof, err = profile.Load(abs); err != nil {
					return err
				}
			}
			ctx, dir, end, err := ladders.begin("stacks")
			if err != nil {
				return err
			}
			defer end()
			m, stderr, closeMeter := runsMeter(cmd.ErrOrStderr(), ladders.quiet)
			defer closeMeter()
			installs, err := findOSU(osuDirs, stderr) // before any stack is built: a wrong --osu fails at once
			if err != nil {
				return err
			}
			reference := "gotune sm"
			var cs []mpistack.Contender
			if gpu {
				reference = "gotune cudaipc"
				cs, err = newGPUContenders(ctx, dir, prof, torchScript, stderr)
			} else {
				cs, err = newStackContenders(ctx, dir, only, prof, ladders.ranks, stderr)
				cs = withSingles(cs, singles, stderr)
			}
			if err != nil {
				return err
			}
			osu, err := osuContenders(ctx, dir, installs, prof, stderr)
			if err != nil {
				return err
			}
			cs = append(cs, osu...)
			if referenceFlag != "" {
				if cs, err = referenceFirst(cs, referenceFlag); err != nil {
					return err
				}
				reference = referenceFlag
			}
			results := map[string][]bench.Result{}
			err = ladders.run(ctx, cs, m, func(_ bench.Pattern, res []bench.Result) error {
				for _, r := range res {
					results[r.Label] = append(results[r.Label], r)
				}
				return nil
			})
			if err != nil {
				return err
			}
			closeMeter() // before the comparison prints: it would tear the bars
			var sides []compare.Side
			var all []bench.Result
			for _, c := range cs {
				sides = append(sides, compare.Side{Name: c.Label, Results: results[c.Label]})
				all = append(all, results[c.Label]...)
			}
			tables, err := compare.Build(sides)
			if err != nil {
				return err
			}
			var text bytes.Buffer
			fmt.Fprintf(&text, "# gotune %s stacks, %d interleaved rounds, medians; reference %s\n# command: gotune %s\n",
				hostinfo.GotuneVersion(), ladders.rounds, reference, strings.Join(os.Args[1:], " "))
			if err := compare.Write(&text, format, tables); err != nil {
				return err
			}
			if _, err := cmd.OutOrStdout().Write(text.Bytes()); err != nil {
				return err
			}
			return saveComparison(outDir, "stacks-", text.Bytes(), all)
		},
	}
	ladders.flags(cmd, 8, "size of one discarded bandwidth point opening every bw run (0: none)", "interleaved rounds: each configuration once per round")
	fl := cmd.Flags()
	fl.StringVar(&profilePath, "profile", "", "also measure each stack with the tuned values of this profile's stacks: section")
	fl.StringArrayVar(&osuDirs, "osu", nil, "also run the OSU Micro-Benchmarks installed under DIR (repeatable; built by Open MPI's or MPICH's mpicc)")
	fl.StringVar(&referenceFlag, "reference", "", `the column the others are compared with (default "gotune sm", --gpu "gotune cudaipc"), e.g. "gotune auto" with --profile`)
	fl.StringSliceVar(&singles, "transports", nil, "also measure these gotune transports on their own beside sm (e.g. cma,xpmem): says whether one of them already reaches a stack where auto does not")
	fl.StringSliceVar(&only, "stack", nil, "stacks to measure ("+strings.Join(stacksMeasured, ",")+"; default all installed)")
	fl.StringVarP(&format, "format", "f", "table", "output: "+strings.Join(compare.Formats, "|"))
	fl.StringVarP(&outDir, "out", "o", "", "also write DIR/stacks-<host>-<time>.txt (the comparison) and .jsonl (every run)")
	fl.StringVar(&ranks, "ranks", "2", "ranks per run: 2 (latency and bw), or an even N, or node (one per core of the cpuset), for alltoall and mbw_mr at N ranks")
	fl.StringVar(&ladders.a2aSizes, "alltoall-sizes", "1K,64K", "alltoall message sizes (--ranks above 2)")
	fl.BoolVar(&gpu, "gpu", false, "measure the first two GPUs instead: gotune cudaipc, NCCL (defaults, and tuned with --profile) and PyTorch's NCCL")
	fl.StringVar(&torchScript, "torch-script", "", "with --gpu: PyTorch's baselines script (default "+torch.ScriptPath+" here or beside the binary's checkout)")
	return cmd
}

// referenceFirst moves the contender labelled label to the front, where
// the comparison takes its reference; a label not measured is an error
// naming those that are.
func referenceFirst(cs []mpistack.Contender, label string) ([]mpistack.Contender, error) {
	i := slices.IndexFunc(cs, func(c mpistack.Contender) bool { return c.Label == label })
	if i < 0 {
		var labels []string
		for _, c := range cs {
			labels = append(labels, strconv.Quote(c.Label))
		}
		return nil, fmt.Errorf("--reference %q: not measured in this run; the columns are %s", label, strings.Join(labels, ", "))
	}
	out := append([]mpistack.Contender{cs[i]}, cs[:i]...)
	return append(out, cs[i+1:]...), nil
}

// withSingles puts gotune's single transports named by --transports right
// after gotune sm (and before auto and the stacks), so that they read as
// gotune's own rows.
func withSingles(cs []mpistack.Contender, singles []string, stderr io.Writer) []mpistack.Contender {
	if len(singles) == 0 || len(cs) == 0 {
		return cs
	}
	out := append([]mpistack.Contender{}, cs[0])
	for _, t := range singles {
		out = append(out, gotuneContender(t, nil, stderr))
	}
	return append(out, cs[1:]...)
}

// newStackContenders is stackContenders; a test replaces it with
// contenders that need no MPI.
var newStackContenders = stackContenders

// newGPUContenders is gpuContenders; a test replaces it with contenders
// that need no GPU.
var newGPUContenders = gpuContenders

// gpuContenders is gotune cudaipc on device buffers (the reference), NCCL
// through the nccl stack adapter with its defaults and, where prof has
// values for it, tuned, and PyTorch's NCCL send/recv. Fewer than two GPUs
// is not supported; NCCL or torch missing is left out with a note.
func gpuContenders(ctx context.Context, dir string, prof *profile.Profile, torchScript string, stderr io.Writer) ([]mpistack.Contender, error) {
	n, err := gpuCount()
	if err != nil {
		return nil, fmt.Errorf("stacks --gpu: %w", err)
	}
	if n < 2 {
		return nil, fmt.Errorf("stacks --gpu: %w", sys.NotSupported("gpu", fmt.Sprintf("%d CUDA device(s): the run measures a pair of GPUs", n), nil))
	}
	ipc := gotuneContender("cudaipc", nil, stderr)
	run := ipc.Run
	ipc.Run = func(ctx context.Context, s bench.Spec) (bench.Result, error) {
		s.Mem = []cuda.MemKind{cuda.MemDevice}
		return run(ctx, s)
	}
	cs, err := stackAdapters(ctx, dir, []string{"nccl"}, prof, 2, stderr)
	if err != nil {
		return nil, err
	}
	cs = append([]mpistack.Contender{ipc}, cs...)
	b, err := torch.Find(ctx, "python3", torchScript)
	switch {
	case errors.Is(err, sys.ErrNotSupported):
		fmt.Fprintf(stderr, "stacks: torch left out: %v\n", err)
	case err != nil:
		return nil, err
	default:
		cs = append(cs, mpistack.Contender{Label: "torch", Run: b.Run})
	}
	return cs, nil
}

// gpuCount is the CUDA devices this process sees; none where the driver
// is missing.
func gpuCount() (int, error) {
	if err := cuda.Load(); err != nil {
		if errors.Is(err, sys.ErrNotSupported) {
			return 0, nil
		}
		return 0, err
	}
	return cuda.DeviceCount()
}

// stackContenders is gotune sm, gotune auto routed by prof's decisions
// (when there is a profile), then each named stack with its defaults and,
// where prof has values for it, with those loaded as its file. A stack
// that is not installed is left out, with a note on stderr.
func stackContenders(ctx context.Context, dir string, names []string, prof *profile.Profile, ranks int, stderr io.Writer) ([]mpistack.Contender, error) {
	cs := []mpistack.Contender{gotuneContender("sm", nil, stderr)}
	if prof != nil {
		cs = append(cs, gotuneContender("auto", auto.LaunchOptions(prof.Path(), prof), stderr))
	}
	more, err := stackAdapters(ctx, dir, names, prof, ranks, stderr)
	return append(cs, more...), err
}

// stackAdapters are each named stack with its defaults and, where prof has
// values for it, with those loaded as its file. A stack that is not
// installed is left out, with a note on stderr.
func stackAdapters(ctx context.Context, dir string, names []string, prof *profile.Profile, ranks int, stderr io.Writer) ([]mpistack.Contender, error) {
	var cs []mpistack.Contender
	var tuned map[string]profile.Stack
	if prof != nil {
		tuned = prof.Stacks
	}
	for _, name := range names {
		if name == "ucx" && ranks > 2 {
			fmt.Fprintf(stderr, "stacks: ucx left out: ucx_perftest measures one pair, not %d ranks (MPICH and Open MPI may run over UCX by their own settings)\n", ranks)
			continue
		}
		a, err := stack.New(name)
		if err != nil {
			return nil, err
		}
		sdir := filepath.Join(dir, name)
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			return nil, err
		}
		if err := a.Prepare(ctx, sdir); err != nil {
			if errors.Is(err, sys.ErrNotSupported) {
				fmt.Fprintf(stderr, "stacks: %s left out: %v\n", name, err)
				continue
			}
			return nil, err
		}
		cs = append(cs, a.Contender(sdir, "defaults", nil))
		if t, ok := tuned[name]; ok && len(t.Params) > 0 {
			cs = append(cs, a.Contender(sdir, "tuned", t.Params))
		}
	}
	return cs, nil
}

// osuInstall is an OSU install named by --osu and the label of its rows.
type osuInstall struct {
	osu   mpistack.OSU
	label string
}

// findOSU reads the OSU installs under dirs. An install whose launcher is
// missing is left out, with a note on stderr; one gotune cannot read is an
// error.
func findOSU(dirs []string, stderr io.Writer) ([]osuInstall, error) {
	var installs []osuInstall
	seen := map[string]int{}
	for _, dir := range dirs {
		o, err := mpistack.FindOSU(dir)
		if err != nil {
			return nil, fmt.Errorf("--osu: %w", err)
		}
		if _, err := exec.LookPath(o.Launcher()); err != nil {
			fmt.Fprintf(stderr, "stacks: osu %s left out: its binaries link %s, whose %s is not in PATH\n", dir, o.Family, o.Launcher())
			continue
		}
		seen[o.Family]++
		label := "osu " + o.Family
		if n := seen[o.Family]; n > 1 {
			label += fmt.Sprintf(" %d", n)
		}
		installs = append(installs, osuInstall{o, label})
	}
	return installs, nil
}

// osuContenders are the OSU installs, each run with its MPI library's
// defaults and, where prof has tuned values for that library, again with
// them loaded as a user loads the native file ("osu openmpi tuned"): OSU's
// own figure for what the file changes.
func osuContenders(ctx context.Context, dir string, installs []osuInstall, prof *profile.Profile, stderr io.Writer) ([]mpistack.Contender, error) {
	var cs []mpistack.Contender
	for _, in := range installs {
		cs = append(cs, in.osu.Contender(in.label))
		if prof == nil || len(prof.Stacks[in.osu.Family].Params) == 0 {
			continue
		}
		a, err := stack.New(in.osu.Family)
		if err != nil {
			return nil, err
		}
		l, ok := a.(stack.Loader)
		if !ok {
			continue
		}
		sdir := filepath.Join(dir, "osu-"+in.osu.Family)
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			return nil, err
		}
		if err := a.Prepare(ctx, sdir); err != nil {
			if errors.Is(err, sys.ErrNotSupported) {
				fmt.Fprintf(stderr, "stacks: %s tuned left out: %v\n", in.label, err)
				continue
			}
			return nil, err
		}
		st, err := l.Loaded(sdir, in.label+" tuned", prof.Stacks[in.osu.Family].Params)
		if err != nil {
			return nil, err
		}
		cs = append(cs, in.osu.ContenderUnder(st))
	}
	return cs, nil
}
