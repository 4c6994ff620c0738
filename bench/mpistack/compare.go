package mpistack

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/montanaflynn/stats"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/transports"
)

// comparison is one size of a side-by-side table.
type comparison struct {
	size        int
	medians     []float64 // ours, then theirs, in argument order
	best, other float64   // best median of ours and of theirs
	ratio       float64   // > 1: ours is better; NaN when a best median is not positive
	// paired is the median over rounds of the same ratio taken within each
	// round, between the two results whose medians are best; NaN unless
	// both have the same number (≥ 2) of positive samples, one per round.
	paired float64
}

// Compare writes a ratio table: for each size present in all results, each
// result's median and the ratio best(ours)/best(theirs), oriented so that
// > 1.0 means ours is better (for latency: theirs/ours; for bandwidth and
// message rate: ours/theirs). A summary line follows: the minimum ratio and
// the geometric mean of the ratios.
//
// Results pooled by Interleave hold one sample per round, in round order;
// for those the table adds the round-paired ratio: per round, the best
// of ours (by median) against the best of theirs, then the median over
// rounds. Both were measured back to back in every round, so a slow spell
// of the machine that spans a round scales both and cancels, where it
// would move one median and not the other.
func Compare(w io.Writer, ours, theirs []bench.Result) error {
	rows, pattern, err := compare(ours, theirs)
	if err != nil {
		return fmt.Errorf("compare results: %w", err)
	}
	all := append(slices.Clip(ours), theirs...)
	header := []string{"Size"}
	for _, r := range all {
		header = append(header, r.Label)
	}
	header = append(header, "best ours", "best theirs", "ratio", "paired")

	t := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAlignment(tw.AlignRight))
	t.Header(header)
	for _, c := range rows {
		row := []string{transports.FormatSize(c.size)}
		for _, m := range c.medians {
			row = append(row, formatValue(m))
		}
		row = append(row, formatValue(c.best), formatValue(c.other), formatRatio(c.ratio), formatRatio(c.paired))
		if err := t.Append(row); err != nil {
			return fmt.Errorf("compare results: %w", err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("compare results: %w", err)
	}
	_, err = fmt.Fprintln(w, summary(rows, pattern))
	return err
}

// compare computes the rows of Compare's table.
func compare(ours, theirs []bench.Result) ([]comparison, bench.Pattern, error) {
	if len(ours) == 0 || len(theirs) == 0 {
		return nil, "", errors.New("need at least one result on each side")
	}
	all := append(slices.Clip(ours), theirs...)
	pattern := all[0].Spec.Pattern
	for _, r := range all {
		if r.Spec.Pattern != pattern {
			return nil, "", fmt.Errorf("%q measures %s, %q measures %s", all[0].Label, pattern, r.Label, r.Spec.Pattern)
		}
	}
	better := func(a, b float64) bool { return a < b }
	if pattern.HigherIsBetter() {
		better = func(a, b float64) bool { return a > b }
	}

	var rows []comparison
	for _, p := range all[0].Points {
		c := comparison{size: p.Size}
		var points []bench.Point
		for _, r := range all {
			q, ok := pointAt(r, p.Size)
			if !ok {
				break
			}
			c.medians = append(c.medians, q.Median)
			points = append(points, q)
		}
		if len(c.medians) < len(all) {
			continue // not in every result
		}
		bi, oi := 0, len(ours)
		for i, m := range c.medians {
			switch {
			case i < len(ours) && better(m, c.medians[bi]):
				bi = i
			case i >= len(ours) && better(m, c.medians[oi]):
				oi = i
			}
		}
		c.best, c.other = c.medians[bi], c.medians[oi]
		oriented := func(ours, theirs float64) float64 {
			if !pattern.HigherIsBetter() {
				return theirs / ours
			}
			return ours / theirs
		}
		c.ratio = math.NaN()
		if c.best > 0 && c.other > 0 {
			c.ratio = oriented(c.best, c.other)
		}
		c.paired = math.NaN()
		if a, b := points[bi].Samples, points[oi].Samples; len(a) >= 2 && len(a) == len(b) && !slices.ContainsFunc(a, nonPositive) && !slices.ContainsFunc(b, nonPositive) {
			perRound := make([]float64, len(a))
			for k := range a {
				perRound[k] = oriented(a[k], b[k])
			}
			c.paired, _ = stats.Median(perRound) // len(perRound) >= 2: no error
		}
		rows = append(rows, c)
	}
	if len(rows) == 0 {
		return nil, "", errors.New("no message size is present in every result")
	}
	return rows, pattern, nil
}

func nonPositive(v float64) bool { return !(v > 0) }

func pointAt(r bench.Result, size int) (bench.Point, bool) {
	for _, p := range r.Points {
		if p.Size == size {
			return p, true
		}
	}
	return bench.Point{}, false
}

// summary is the line under the table: the worst ratio and the geometric mean
// over the sizes that have one.
func summary(rows []comparison, pattern bench.Pattern) string {
	ratios := func(of func(comparison) float64) (minRatio float64, minSize int, geomean float64, n int) {
		minRatio, logSum := math.Inf(1), 0.0
		for _, c := range rows {
			r := of(c)
			if math.IsNaN(r) {
				continue
			}
			if r < minRatio {
				minRatio, minSize = r, c.size
			}
			logSum += math.Log(r)
			n++
		}
		return minRatio, minSize, math.Exp(logSum / float64(max(n, 1))), n
	}
	minRatio, minSize, geomean, n := ratios(func(c comparison) float64 { return c.ratio })
	if n == 0 {
		return fmt.Sprintf("%s: no size has a ratio (a best median is not positive)", pattern)
	}
	line := fmt.Sprintf("%s (%s): min ratio %.3f at %s, geomean %.3f over %d sizes (> 1: ours better)",
		pattern, pattern.Unit(), minRatio, transports.FormatSize(minSize), geomean, n)
	if minP, minPSize, geoP, nP := ratios(func(c comparison) float64 { return c.paired }); nP > 0 {
		line += fmt.Sprintf("\n%s round-paired: min %.3f at %s, geomean %.3f over %d sizes",
			pattern, minP, transports.FormatSize(minPSize), geoP, nP)
	}
	return line
}

// formatValue keeps about four significant digits without exponents.
func formatValue(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func formatRatio(r float64) string {
	if math.IsNaN(r) {
		return "-"
	}
	return fmt.Sprintf("%.3f", r)
}
