package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/compare"
	"github.com/gotune/gotune/bench/importer"
	"github.com/gotune/gotune/bench/output"
	"github.com/gotune/gotune/htmlreport"
)

// newCompare puts result files side by side: each argument is a side, the
// first the reference. Every file is read before anything is written, so
// a bad file prints no partial comparison.
func newCompare() *cobra.Command {
	var format, pattern, html string
	cmd := &cobra.Command{
		Use:   "compare [NAME=]PATH[,PATH...] [NAME=]PATH[,PATH...]...",
		Short: "Compare results of stacks, versions, machines or tools size by size: medians, intervals, ratios, U-test verdicts",
		Long: `Each argument is a side: its files' results, named NAME (default: the first
file's base name). Files of one side are repeated runs: samples of one pattern,
unit and size are pooled. A file is gotune's JSON lines (gotune bench --format json,
gotune import --out) or another tool's output (` + strings.Join(importer.Tools(), ", ") + `).

The first side is the reference. Per pattern and unit, a row per size of the
reference gives each side's median, its interval and sample count and, for the
other sides, the ratio to the reference (> 1: better, whichever way the unit
goes) and a Mann-Whitney U verdict: better or worse (p < 0.05 and medians more
than 3% apart), same (within 3%), unsettled, or n/a with one sample.

A PATH may also be a sweep's or a verification's run directory: its
verification trials of auto (what its profile delivers) are the side's results.
With --html DIR it also writes DIR/report.html (and each plot as an SVG file
beside it): per pattern every side's medians with their intervals overlaid, and
each side's ratio to the reference, and prints its path on stderr.`,
		Example: `  gotune compare openmpi=osu_latency.txt mpich=osu_latency_mpich.txt gotune=runs.jsonl
  gotune compare --format markdown --pattern bw base=a.jsonl,b.jsonl tuned=c.jsonl
  gotune compare --html /tmp/cmp node1=/data/node1/RUN node2=/data/node2/RUN`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(compare.Formats, format) {
				return fmt.Errorf("--format %q: want one of %s", format, strings.Join(compare.Formats, ", "))
			}
			var sides []compare.Side
			for _, arg := range args {
				s, err := readSide(arg, pattern, func(path, tool string, n int) {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s, %d results\n", path, tool, n)
				})
				if err != nil {
					return fmt.Errorf("compare: %w", err)
				}
				sides = append(sides, s)
			}
			tables, err := compare.Build(sides)
			if err != nil {
				return err
			}
			if err := compare.Write(cmd.OutOrStdout(), format, tables); err != nil {
				return err
			}
			if html != "" {
				path, err := htmlreport.WriteCompare(html, tables)
				if err != nil {
					return fmt.Errorf("--html: %w", err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "report: %s\n", path)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&format, "format", "f", "table", "output: "+strings.Join(compare.Formats, "|"))
	fl.StringVarP(&pattern, "pattern", "p", "", "keep only this pattern (latency, bw, ..., or an imported one such as allreduce)")
	fl.StringVar(&html, "html", "", "also write DIR/report.html: the sides' curves overlaid and their ratios to the reference, as SVG plots")
	return cmd
}

// splitSide parses "[NAME=]PATH[,PATH...]": text before the first "=" is
// a name unless it holds a path separator (then the "=" is the path's).
func splitSide(arg string) (name string, paths []string, err error) {
	if n, rest, ok := strings.Cut(arg, "="); ok && !strings.ContainsRune(n, os.PathSeparator) {
		if n == "" {
			return "", nil, fmt.Errorf("side %q: empty name before =", arg)
		}
		name, arg = n, rest
	}
	for _, p := range strings.Split(arg, ",") {
		if p == "" {
			return "", nil, fmt.Errorf("side %q: empty path", arg)
		}
		paths = append(paths, p)
	}
	if name == "" {
		name = filepath.Base(paths[0])
	}
	return name, paths, nil
}

// readSide reads one argument's files, keeping the results of pattern
// (all when empty); read is told of each file read.
func readSide(arg, pattern string, read func(path, tool string, n int)) (compare.Side, error) {
	name, paths, err := splitSide(arg)
	if err != nil {
		return compare.Side{}, err
	}
	if p, err := bench.ParsePattern(pattern); err == nil {
		pattern = string(p) // "lat" is latency; imported patterns stay as given
	}
	side := compare.Side{Name: name}
	for _, path := range paths {
		tool, results, err := readResults(path)
		if err != nil {
			return compare.Side{}, fmt.Errorf("side %q: %w", name, err)
		}
		read(path, tool, len(results))
		for _, r := range results {
			if pattern == "" || string(r.Spec.Pattern) == pattern {
				side.Results = append(side.Results, r)
			}
		}
	}
	if len(side.Results) == 0 { // only a pattern filter leaves none: every reader refuses an empty file
		return compare.Side{}, fmt.Errorf("side %q (%s): no results of pattern %q", name, strings.Join(paths, ", "), pattern)
	}
	return side, nil
}

// readResults reads a file of gotune's JSON lines (it starts with "{")
// or, failing that, any tool's output importer knows. Errors name the file
// and, where one is at fault, the line.
func readResults(path string) (tool string, results []bench.Result, err error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		results, err := htmlreport.RunResults(path)
		return "gotune run directory", results, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err // *PathError: names the file
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		results, err := output.ReadJSON(path, bytes.NewReader(data))
		return "gotune", results, err
	}
	return importer.Parse(path, data)
}
