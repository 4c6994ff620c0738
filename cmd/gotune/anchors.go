package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
	"github.com/gotune/gotune/bench/output"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/progress"
	"github.com/gotune/gotune/transports"
)

func newAnchors() *cobra.Command {
	var (
		ladders interleaved
		outDir  string
		opts    []string
	)
	cmd := &cobra.Command{
		Use:   "anchors",
		Short: "Measure gotune's sm and cma beside Open MPI (vader, single copy cma and none), interleaved, and print the ratios",
		Long: `anchors compiles a small MPI benchmark with mpicc (same loop constants as gotune's),
then measures latency and bandwidth through gotune's sm and cma transports and through
Open MPI's vader BTL with single_copy_mechanism cma and none. Every round runs each
configuration once, back to back, so a machine whose speed drifts is compared with itself.
Every bandwidth run opens with one discarded point (--settle) so that the first measured size
does not pay for the first milliseconds after launch. With --block N each run measures N sizes
of the ladder, every configuration in turn, so the configurations' points at one size are taken
seconds apart (at the cost of more launches). Ratios > 1 mean gotune is better.
On a terminal a bar per pattern counts the runs done of those planned; elsewhere
plain lines say so every 15 s; --quiet shows neither. The tables print at the end.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := parseOpts(opts)
			if err != nil {
				return err
			}
			if err := ladders.parseSettle(); err != nil {
				return err
			}
			ladders.opts = o
			ctx, tmp, end, err := ladders.begin("anchor")
			if err != nil {
				return err
			}
			defer end()
			m, stderr, closeMeter := runsMeter(cmd.ErrOrStderr(), ladders.quiet)
			// The tables wait for the bars to end: they would tear them.
			var tables bytes.Buffer
			flush := func() error {
				closeMeter()
				_, err := cmd.OutOrStdout().Write(tables.Bytes())
				tables.Reset()
				return err
			}
			defer flush()
			cs, err := anchorContenders(ctx, tmp, stderr)
			if err != nil {
				return err
			}
			var text bytes.Buffer
			out := io.MultiWriter(&tables, &text)
			fmt.Fprintf(&text, "# gotune %s\n# command: gotune %s\n", hostinfo.GotuneVersion(), strings.Join(os.Args[1:], " "))
			var all []bench.Result
			err = ladders.run(ctx, cs, m, func(p bench.Pattern, res []bench.Result) error {
				ours, theirs := mpistack.Split(cs, res)
				fmt.Fprintf(out, "\n## %s, medians of %d interleaved repetitions (%s)\n", p, ladders.rounds, p.Unit())
				all = append(all, res...)
				return mpistack.Compare(out, ours, theirs)
			})
			if err != nil {
				return err
			}
			if err := flush(); err != nil {
				return err
			}
			return saveComparison(outDir, "", text.Bytes(), all)
		},
	}
	ladders.flags(cmd, bench.DefaultReps, "size of one discarded bandwidth point that opens every bw run of every configuration, so that no measured size pays for the ranks' first milliseconds (0: none)",
		"interleaved repetitions of every configuration")
	fl := cmd.Flags()
	fl.IntVar(&ladders.block, "block", 0, "sizes per run: each round measures this many sizes with every configuration before the next ones (0: the whole ladder per run)")
	fl.StringVarP(&outDir, "out", "o", "", "also write DIR/<host>-<time>.txt (tables) and .jsonl (every run)")
	fl.StringArrayVar(&opts, "opt", nil, "gotune transport option KEY=VALUE (repeatable)")
	return cmd
}

// anchorContenders builds the reference benchmark in dir and returns
// anchors' configurations, their ranks' stderr going to stderr. A test
// replaces it with contenders that need no MPI.
var anchorContenders = func(ctx context.Context, dir string, stderr io.Writer) ([]mpistack.Contender, error) {
	bin, err := mpistack.Build(ctx, mpistack.OpenMPIVader("cma"), dir)
	if err != nil {
		return nil, err
	}
	return contenders(bin, stderr), nil
}

// runsMeter is the progress of anchors and stacks on w: a bar of runs per
// pattern on a terminal, periodic plain lines elsewhere, nothing (a nil
// meter) with quiet. stderr is where the run's other lines go so as not to
// tear the bars; closeMeter ends the bars (again: nothing).
func runsMeter(w io.Writer, quiet bool) (m mpistack.Meter, stderr io.Writer, closeMeter func()) {
	if quiet {
		return nil, w, func() {}
	}
	pm := progress.New(w, progress.Unit("runs"))
	return pm, pm.Writer(), pm.Close
}

// interleaved is the latency and the bandwidth ladder that anchors and
// stacks measure, every configuration once per round.
type interleaved struct {
	latSizes, bwSizes, settleSize string
	settle                        int // settleSize parsed: the discarded point opening every bandwidth run
	rounds, block                 int
	opts                          transports.Options
	quiet                         bool
	timeout                       time.Duration
	// ranks > 2 measures the multi-rank patterns instead: alltoall over
	// a2aSizes, then mbw_mr over bwSizes, ranks placed by bench.PlaceRanks.
	ranks    int
	a2aSizes string
}

// flags registers the ladders' flags on cmd, and --timeout and --quiet,
// --reps defaulting to reps.
func (l *interleaved) flags(cmd *cobra.Command, reps int, settleUsage, repsUsage string) {
	fl := cmd.Flags()
	fl.StringVar(&l.latSizes, "latency-sizes", "8", "latency message sizes")
	fl.StringVar(&l.bwSizes, "bw-sizes", "4K:16M", "bandwidth message sizes")
	fl.StringVar(&l.settleSize, "settle", "4M", settleUsage)
	fl.IntVar(&l.rounds, "reps", reps, repsUsage)
	fl.DurationVar(&l.timeout, "timeout", time.Hour, "give up after this long")
	fl.BoolVarP(&l.quiet, "quiet", "q", false, "no progress (bars on a terminal, lines elsewhere) on stderr")
}

// begin bounds the run by --timeout and makes it a scratch folder of kind
// (launch.TempDir: named with this process, so that the next launch
// removes it if the process is killed); end removes the folder and
// releases the bound.
func (l *interleaved) begin(kind string) (ctx context.Context, dir string, end func(), err error) {
	ctx, cancel := jobContext(l.timeout)
	if dir, err = launch.TempDir(kind); err != nil {
		cancel()
		return nil, "", nil, err
	}
	return ctx, dir, func() {
		os.RemoveAll(dir)
		cancel()
	}, nil
}

// parseSettle sets settle from --settle.
func (l *interleaved) parseSettle() error {
	var err error
	if l.settle, err = transports.ParseSize(l.settleSize); err != nil {
		return fmt.Errorf("--settle: %w", err)
	}
	return nil
}

// run measures cs over the latency ladder, then the bandwidth one, and
// hands each pattern's results to each.
func (l *interleaved) run(ctx context.Context, cs []mpistack.Contender, m mpistack.Meter, each func(bench.Pattern, []bench.Result) error) error {
	type ladder struct {
		pattern bench.Pattern
		sizes   string
		settle  int
	}
	ladders := []ladder{{bench.Latency, l.latSizes, 0}, {bench.Bandwidth, l.bwSizes, l.settle}}
	ranks, cpus := 0, bench.DefaultCPUs(2)
	if l.ranks > 2 {
		ladders = []ladder{{bench.AllToAll, l.a2aSizes, 0}, {bench.MultiBandwidth, l.bwSizes, l.settle}}
		ranks, cpus = l.ranks, bench.PlaceRanks(l.ranks)
	}
	for _, pc := range ladders {
		sizes, err := bench.ParseSizes(pc.sizes)
		if err != nil {
			return err
		}
		spec := bench.Spec{Pattern: pc.pattern, Sizes: sizes, Window: bench.DefaultWindow, Options: l.opts, CPUs: cpus, Ranks: ranks}
		res, err := mpistack.Interleave(ctx, cs, spec, l.rounds, pc.settle, l.block, m)
		if err != nil {
			return err
		}
		if err := each(pc.pattern, res); err != nil {
			return err
		}
	}
	return nil
}

// gotuneContender is gotune's own runtime over transport, with opts
// (nil: the spec's own), its ranks' stderr going to stderr.
func gotuneContender(transport string, opts transports.Options, stderr io.Writer) mpistack.Contender {
	return mpistack.Contender{Label: "gotune " + transport, Ours: true,
		Run: func(ctx context.Context, s bench.Spec) (bench.Result, error) {
			s.Transport = transport
			if opts != nil {
				s.Options = opts
			}
			return bench.Run(ctx, s, 0, launch.Hooks{Stderr: stderr})
		}}
}

func contenders(anchorBin string, stderr io.Writer) []mpistack.Contender {
	gotune := func(transport string) mpistack.Contender { return gotuneContender(transport, nil, stderr) }
	ompi := func(single string) mpistack.Contender {
		st := mpistack.OpenMPIVader(single)
		return mpistack.Contender{Label: st.Name,
			Run: func(ctx context.Context, s bench.Spec) (bench.Result, error) {
				s.Options, s.CPUs = nil, nil
				return mpistack.Run(ctx, st, anchorBin, s)
			}}
	}
	return []mpistack.Contender{gotune("sm"), gotune("cma"), ompi("cma"), ompi("none")}
}

// saveComparison writes DIR/PREFIX<host>-<time>.txt (the tables as
// printed) and .jsonl (every run as JSON lines) for anchors and stacks;
// with no dir, nothing.
func saveComparison(dir, prefix string, tables []byte, results []bench.Result) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	host, _ := os.Hostname()
	base := filepath.Join(dir, fmt.Sprintf("%s%s-%s", prefix, host, time.Now().UTC().Format("20060102-150405")))
	if err := os.WriteFile(base+".txt", tables, 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	f, err := os.OpenFile(base+".jsonl", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if err := output.Write(f, "json", results); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
