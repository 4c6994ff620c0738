package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/htmlreport"
	"github.com/gotune/gotune/internal/progress"
	"github.com/gotune/gotune/tuner/sweep"
)

func newReport() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "report RUN_DIR...",
		Short: "Draw sweep run directories as one self-contained report.html with SVG plots",
		Long: `report draws each run directory (a sweep's or a verification's, its store plain
or compressed as checked in) from its stored measurements: latency and
bandwidth against message size with the confidence band of every point, every
stage's candidates with the winner and why it won, the decisions drawn where
they were made (eager limit, fragment size, transport crossovers, FIFO depth
with its memory footprint against ranks per node, the inter-node and GPU
thresholds), the hazard verdicts with the stacks the watchdog took of caught
hangs, and the machine. Nothing is measured, and the run directory's own files
are left as they are: the decisions are replayed as gotune tune makes them, on
a copy.

It writes OUT/report.html (styles and the plots' font inline, the plots inline
SVG, no script: it opens offline) and every plot as OUT/<plot>.svg, and prints
the report's path. OUT is the run directory with one, and must be given
with several.`,
		Example: `  gotune report /data/node1/RUN
  gotune report --out /tmp/both /data/node1/RUN /data/node2/RUN`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				if len(args) > 1 {
					return fmt.Errorf("--out: several run directories need a directory for their report")
				}
				out = args[0]
			}
			ctx, cancel := jobContext(0)
			defer cancel()
			path, err := htmlreport.Write(ctx, out, args...)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), path)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "directory for report.html and the plots (default: the run directory)")
	return cmd
}

// writeRunReport writes the report of a finished run into its directory
// and says where it is on w.
func writeRunReport(ctx context.Context, w io.Writer, res sweep.Result) error {
	if res.Dir == "" || !res.Summarized {
		return nil
	}
	path, err := htmlreport.Write(ctx, res.Dir, res.Dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "report: %s\n", path)
	return nil
}

// runMeter is a sweep's progress on w: bars on a terminal, plain lines
// elsewhere, nothing with quiet. close ends it before the summary prints.
func runMeter(cfg *sweep.Config, w io.Writer, quiet bool) (close func()) {
	if quiet {
		cfg.Progress, cfg.Meter = nil, nil
		return func() {}
	}
	m := progress.New(w)
	cfg.Progress, cfg.Meter = m.Writer(), m
	return m.Close
}
