package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/tuner/sweep"
)

func newVerify() *cobra.Command {
	var out, resume, sizes, settle, against string
	var rounds int
	var quiet, noReport bool
	cmd := &cobra.Command{
		Use:   "verify PROFILE",
		Short: "Measure a profile (--transport auto) beside each single transport, interleaved, and print the ratios",
		Long: `verify runs the sweep's verification on its own: bandwidth of --transport auto
with PROFILE beside every single transport of the quick plan with its
defaults (over a fragment ring the node affords at the profile's ranks per
node, and with the profile's progress thread where it has one), in
rounds, each one fresh pair of rank processes running every candidate side
by side, a repetition of each in turn, and prints per size the ratio of
medians, the median of per-round ratios (paired) and the paired
test of the best single transport against it (per-round ratios, the noise
pooled over nearby sizes). With --against PROFILE_B it measures PROFILE beside
PROFILE_B instead (both through --transport auto): whether two sweeps of one
node decided alike, size by size. Every round opens with
one discarded point (--settle) per candidate, as in gotune anchors. Use it to re-check a
checked-in profile on a node, or to gather more rounds than a sweep's five.
The run goes to OUT/<host>/<run-id>/ (meta.json, measurements.jsonl,
measurements.bench, summary); a killed run continues with --resume DIR, whose
store may be compressed (measurements.jsonl.gz) as sweep --resume allows.`,
		Example: `  gotune verify /data/node1/RUN/profile.yaml --rounds 20
  gotune verify A/profile.yaml --against B/profile.yaml --rounds 8
  gotune verify --resume /data/node1/RUN`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := sweep.Config{Out: out, Resume: resume, Progress: cmd.ErrOrStderr(),
				Command: "gotune " + strings.Join(os.Args[1:], " ")}
			path := ""
			if len(args) == 1 {
				path = args[0]
			}
			switch {
			case resume == "" && path == "":
				return fmt.Errorf("verify needs a PROFILE (or --resume DIR)")
			case resume != "" && (cmd.Flags().Changed("rounds") || cmd.Flags().Changed("sizes") || cmd.Flags().Changed("settle") || against != ""):
				return fmt.Errorf("--resume continues the run's own rounds, sizes, settling point and profiles; drop --rounds, --sizes, --settle and --against")
			case rounds < 1:
				return fmt.Errorf("--rounds %d: want at least 1", rounds)
			}
			verifySizes, err := sweep.ParseSizeList(sizes)
			if err != nil {
				return fmt.Errorf("--sizes: %w", err)
			}
			var settleBytes sweep.Size
			if err := settleBytes.UnmarshalText([]byte(settle)); err != nil {
				return fmt.Errorf("--settle: %w", err)
			}
			p := sweep.Quick()
			p.VerifySizes, p.VerifyRounds, p.Settle = verifySizes, rounds, settleBytes
			cfg.Plan = p
			ctx, cancel := jobContext(0)
			defer cancel()
			closeMeter := runMeter(&cfg, cmd.ErrOrStderr(), quiet)
			res, err := sweep.Verify(ctx, cfg, path, against)
			closeMeter()
			return finishRun(ctx, cmd, res, err, noReport)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&rounds, "rounds", 10, "interleaved rounds (each: one trial of auto and of every single transport)")
	fl.StringVar(&sizes, "sizes", "1:16M", "message sizes: a power-of-two ladder LO:HI or a list (K/M/G suffixes)")
	fl.StringVar(&settle, "settle", "4M", "size of one discarded bandwidth point that opens every trial (0: none)")
	fl.StringVar(&out, "out", "results", "results root: the run goes to OUT/<host>/<run-id>/")
	fl.StringVar(&resume, "resume", "", "continue the verification in this directory")
	fl.StringVar(&against, "against", "", "measure PROFILE beside this second profile instead of the single transports")
	fl.BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	fl.BoolVar(&noReport, "no-report", false, "do not write the report (report.html and its plots) into the run directory")
	return cmd
}
