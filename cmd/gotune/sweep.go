package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/tuner/sweep"
)

func newSweep() *cobra.Command {
	var planName, out, resume string
	var stacks []string
	var ranksPerNode int
	var budget time.Duration
	var cluster clusterFlags
	var quiet, noReport bool
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Tune this node: measure, decide, prove safe, emit a profile",
		Long: `sweep runs a plan of trials (fresh rank processes under the watchdog), decides
the transport per size range, eager limit, fragments, FIFO depth and allocator
settings, runs the hazard probes on the result, and writes
OUT/<host>/<run-id>/{meta.json,measurements.jsonl,measurements.bench,summary,profile.yaml}.
With --stack openmpi|mpich|ucx|mimalloc|nccl (repeatable) it also tunes those MPI stacks through
themselves, each with its own launcher and its tuned values loaded as users
load them, checks the chosen values with the stacks' hazards (head-to-head
windows and a many-to-one flood, payloads validated), records the decisions in
the profile's stacks section and writes each stack's native file under
OUT/<host>/<run-id>/native/ (gotune profile render writes them again).
Under mpirun or srun (--launcher mpirun|srun, one gotune per launcher rank)
launcher rank 0 runs the sweep: the host stages on its node, and, when the job
spans nodes, inter-node stages on a pair across two of them (transport, eager
limit, tcp connections or ib rendezvous), recorded as the profile's internode
decisions. A killed sweep continues with --resume DIR: nothing finished is measured again;
DIR's store may be compressed (measurements.jsonl.gz, as checked in), and the
records measured since are appended to a measurements.jsonl beside it.

It ends by writing the run's report (gotune report: report.html and its plots
in the run directory) and printing its path, unless --no-report. While it runs,
stderr shows a progress bar per stage on a terminal (trials done of planned,
time elapsed, what is left of the budget), and otherwise the trials as they end
and a line per stage at most every 15 seconds; --quiet shows neither.`,
		Example: `  gotune sweep                      # quick built-in plan, under 5 minutes
  gotune sweep --plan full --budget 30m
  gotune sweep --stack openmpi --stack mpich
  gotune sweep --resume /data/node1/RUN
  srun -N2 --ntasks-per-node=1 gotune sweep --launcher srun`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := sweep.Config{Out: out, Resume: resume, Budget: budget, Progress: cmd.ErrOrStderr(),
				Command: "gotune " + strings.Join(os.Args[1:], " ")}
			if resume == "" {
				p, err := sweep.LoadPlan(planName)
				if err != nil {
					return fmt.Errorf("--plan: %w", err)
				}
				if cmd.Flags().Changed("ranks-per-node") {
					p.RanksPerNode = ranksPerNode
					if err := p.Check(); err != nil {
						return fmt.Errorf("--ranks-per-node: %w", err)
					}
				}
				if len(stacks) > 0 {
					p.Stacks = stacks
					if err := p.Check(); err != nil {
						return fmt.Errorf("--stack: %w", err)
					}
				}
				cfg.Plan = p
			} else if cmd.Flags().Changed("plan") || cmd.Flags().Changed("stack") || cmd.Flags().Changed("ranks-per-node") {
				return fmt.Errorf("--resume continues the run's own plan; drop --plan, --stack and --ranks-per-node")
			}
			if budget < 0 {
				return fmt.Errorf("--budget %v: must be positive", budget)
			}
			ctx, cancel := jobContext(0)
			defer cancel()
			j, err := cluster.join(ctx, cmd)
			if err != nil || j.serve {
				return err
			}
			defer j.close()
			if j.cluster != nil {
				cfg.Nodes = j.cluster.Nodes()
			}
			closeMeter := runMeter(&cfg, cmd.ErrOrStderr(), quiet)
			res, err := sweep.Run(ctx, cfg)
			closeMeter()
			return finishRun(ctx, cmd, res, err, noReport)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&planName, "plan", "quick", "plan: quick, full, or a YAML plan file")
	fl.DurationVar(&budget, "budget", 0, "time budget (default: the plan's); optional rounds and bisection stop when it runs out")
	fl.StringVar(&out, "out", "results", "results root: the run goes to OUT/<host>/<run-id>/")
	fl.StringVar(&resume, "resume", "", "continue the run in this directory")
	fl.BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	fl.BoolVar(&noReport, "no-report", false, "do not write the report (report.html and its plots) into the run directory")
	fl.IntVar(&ranksPerNode, "ranks-per-node", 0, "ranks per node the profile will serve (default: one per core); FIFO depth and fragments are decided within the memory their channels take at that count")
	fl.StringSliceVar(&stacks, "stack", nil, "also tune this MPI stack through itself: "+strings.Join(sweep.StackNames(), ", ")+" (repeatable)")
	cluster.register(cmd)
	return cmd
}

func newTune() *cobra.Command {
	var benchOut string
	cmd := &cobra.Command{
		Use:   "tune DIR",
		Short: "Re-decide a sweep's run directory from its stored measurements, without measuring",
		Long: `tune re-decides the run in DIR from its store, measurements.jsonl or, as
as the catalogue keeps it, measurements.jsonl.gz (then any measurements.jsonl
beside it), and rewrites DIR's profile.yaml, summary and measurements.bench:
nothing is measured.

With --bench FILE it does only this instead: write the Go benchmark format
view of DIR's stored trials (the measurements.bench the run wrote, for
benchstat) to FILE, or to stdout with -. DIR may then be a verification's
run directory too, and nothing in it is written.`,
		Example: `  gotune tune /data/node1/RUN
  gotune tune --bench run.bench /data/node1/RUN`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if benchOut != "" {
				return writeBenchView(cmd, args[0], benchOut)
			}
			ctx, cancel := jobContext(0)
			defer cancel()
			res, err := sweep.Tune(ctx, args[0], nil)
			printSummary(cmd, res)
			return err
		},
	}
	cmd.Flags().StringVar(&benchOut, "bench", "", "only write DIR's trials in Go benchmark format to this file (- for stdout)")
	return cmd
}

// writeBenchView writes the Go benchmark view of dir's stored trials to
// path, or to stdout for "-".
func writeBenchView(cmd *cobra.Command, dir, path string) error {
	if path == "-" {
		return sweep.WriteBench(dir, cmd.OutOrStdout())
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--bench: %w", err)
	}
	if err := sweep.WriteBench(dir, f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--bench: %w", err)
	}
	return nil
}

// finishRun ends a command that ran a sweep: it prints the run's summary
// and directory and, unless noReport, writes its report. The run's own
// error, err, comes before the report's.
func finishRun(ctx context.Context, cmd *cobra.Command, res sweep.Result, err error, noReport bool) error {
	printSummary(cmd, res)
	if res.Dir != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "run directory: %s\n", res.Dir)
	}
	if !noReport {
		if rerr := writeRunReport(ctx, cmd.ErrOrStderr(), res); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// printSummary copies a run's summary file to stdout, if there is one.
func printSummary(cmd *cobra.Command, res sweep.Result) {
	if !res.Summarized {
		return
	}
	if b, err := os.ReadFile(filepath.Join(res.Dir, sweep.SummaryFile)); err == nil {
		cmd.OutOrStdout().Write(b)
	}
}
