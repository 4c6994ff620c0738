package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/internal/progress"
	"github.com/gotune/gotune/tuner/probe"
)

// exitStatus is an error that asks Main for a specific exit status.
type exitStatus struct {
	code int
	err  error
}

func (e *exitStatus) Error() string { return e.err.Error() }

// Exit statuses of gotune probe.
const (
	probeHazard = 3 // hazard detected: hang, stall or corrupted data
)

func newProbe() *cobra.Command {
	var (
		list, unsafe, stacks, quiet bool
		deadline, timeout           time.Duration
		ranks                       int
	)
	cmd := &cobra.Command{
		Use:   "probe [ID]",
		Short: "Run a hazard probe (safe form, or --unsafe); exit 0 passed, 3 hazard detected, other: the probe failed",
		Example: `  gotune probe --list
  gotune probe H5
  gotune probe H5 --unsafe   # must be caught: exits 3
  gotune probe H5 --ranks 32 # also every rank to every other at 32 ranks`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			if list {
				for _, p := range probe.List() {
					fmt.Fprintf(w, "%-4s %s\n     %s\n", p.ID, p.Hazard, p.Description)
				}
				return nil
			}
			if len(args) != 1 {
				return fmt.Errorf("name a probe (gotune probe --list)")
			}
			p, err := probe.Lookup(args[0])
			if err != nil {
				return err
			}
			form := "safe"
			if unsafe {
				form = "unsafe"
			}
			stage := p.ID + " " + form
			closeMeter, probed := func() {}, func() {}
			if !quiet {
				stderr := cmd.ErrOrStderr()
				if progress.IsTerminal(stderr) { // a bar with the time it has run, under the line
					m := progress.New(stderr, progress.Unit("probes"))
					m.Plan(stage, 1)
					stderr, closeMeter = m.Writer(), m.Close
					probed = func() { m.Step(stage, stage) }
				}
				fmt.Fprintf(stderr, "%s: running (a rank without progress for %v is a hang)\n", stage, deadline)
			}
			defer closeMeter()
			ctx, cancel := jobContext(timeout)
			defer cancel()
			if ranks > 0 {
				ctx = probe.WithRanks(ctx, ranks)
			}
			began := time.Now()
			v := p.Run(ctx, unsafe, deadline)
			if ctx.Err() == nil {
				probed()
			}
			closeMeter() // before the verdict, which may go to the same terminal
			fmt.Fprintln(w, v.Line())
			if ctx.Err() != nil {
				return fmt.Errorf("%s: interrupted while running its %s form, %v in: %w", p.ID, form, time.Since(began).Round(time.Second), context.Cause(ctx))
			}
			if stacks {
				for r, s := range v.Stacks {
					fmt.Fprintf(cmd.ErrOrStderr(), "=== rank %d stacks ===\n%s\n", r, s)
				}
			}
			switch v.Outcome {
			case probe.Passed:
				return nil
			case probe.HazardDetected:
				return &exitStatus{code: probeHazard, err: fmt.Errorf("%s: hazard detected", p.ID)}
			default:
				return fmt.Errorf("%s: probe failed: %s", p.ID, v.Detail)
			}
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&list, "list", false, "list the probes")
	fl.BoolVar(&unsafe, "unsafe", false, "run the deliberately unsafe variant, which the watchdog must catch")
	fl.BoolVar(&stacks, "stacks", false, "print the stalled ranks' stacks to stderr")
	fl.BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr: the line saying which probe runs (and on a terminal its bar)")
	fl.DurationVar(&deadline, "deadline", 2*time.Second, "watchdog: a rank without progress for this long is a hang")
	fl.DurationVar(&timeout, "timeout", 5*time.Minute, "give up on the probe after this long")
	fl.IntVar(&ranks, "ranks", 0, "the rank count a node will run, for the probes that scale with it (above 3: H5 bursts every rank to every other, H8 sends from every other rank to the one computing)")
	return cmd
}
