package main

import (
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
	var budget time.Duration
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Tune this node: measure, decide, prove safe, emit a profile",
		Long: `sweep runs a plan of trials (fresh rank processes under the watchdog), decides
the transport per size range, eager limit, fragments, FIFO depth and allocator
settings, runs the hazard probes on the result, and writes
OUT/<host>/<run-id>/{meta.json,measurements.jsonl,measurements.bench,summary,profile.yaml}.
A killed sweep continues with --resume DIR: nothing finished is measured again.`,
		Example: `  gotune sweep                      # quick built-in plan, under 5 minutes
  gotune sweep --plan full --budget 30m
  gotune sweep --resume results/node1/20261121-131500`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := sweep.Config{Out: out, Resume: resume, Budget: budget, Progress: cmd.ErrOrStderr(),
				Command: "gotune " + strings.Join(os.Args[1:], " ")}
			if resume == "" {
				p, err := sweep.LoadPlan(planName)
				if err != nil {
					return fmt.Errorf("--plan: %w", err)
				}
				cfg.Plan = p
			} else if cmd.Flags().Changed("plan") {
				return fmt.Errorf("--resume continues the run's own plan; drop --plan")
			}
			if budget < 0 {
				return fmt.Errorf("--budget %v: must be positive", budget)
			}
			ctx, cancel := jobContext(0)
			defer cancel()
			res, err := sweep.Run(ctx, cfg)
			printSummary(cmd, res)
			if res.Dir != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "run directory: %s\n", res.Dir)
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&planName, "plan", "quick", "plan: quick, full, or a YAML plan file")
	fl.DurationVar(&budget, "budget", 0, "time budget (default: the plan's); optional rounds and bisection stop when it runs out")
	fl.StringVar(&out, "out", "results", "results root: the run goes to OUT/<host>/<run-id>/")
	fl.StringVar(&resume, "resume", "", "continue the run in this directory")
	return cmd
}

func newTune() *cobra.Command {
	return &cobra.Command{
		Use:   "tune DIR",
		Short: "Re-decide a sweep's run directory from its stored measurements, without measuring",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := jobContext(0)
			defer cancel()
			res, err := sweep.Tune(ctx, args[0], nil)
			printSummary(cmd, res)
			return err
		},
	}
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
