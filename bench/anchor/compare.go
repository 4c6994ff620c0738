package anchor

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

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
}

// Compare writes a ratio table: for each size present in all results, each
// result's median and the ratio best(ours)/best(theirs), oriented so that
// > 1.0 means ours is better (for latency: theirs/ours; for bandwidth and
// message rate: ours/theirs). A summary line follows: the minimum ratio and
// the geometric mean of the ratios.
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
	header = append(header, "best ours", "best theirs", "ratio")

	t := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAlignment(tw.AlignRight))
	t.Header(header)
	for _, c := range rows {
		row := []string{transports.FormatSize(c.size)}
		for _, m := range c.medians {
			row = append(row, formatValue(m))
		}
		row = append(row, formatValue(c.best), formatValue(c.other), formatRatio(c.ratio))
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
		for _, r := range all {
			q, ok := pointAt(r, p.Size)
			if !ok {
				break
			}
			c.medians = append(c.medians, q.Median)
		}
		if len(c.medians) < len(all) {
			continue // not in every result
		}
		c.best, c.other = c.medians[0], c.medians[len(ours)]
		for i, m := range c.medians {
			switch {
			case i < len(ours) && better(m, c.best):
				c.best = m
			case i >= len(ours) && better(m, c.other):
				c.other = m
			}
		}
		c.ratio = math.NaN()
		if c.best > 0 && c.other > 0 {
			c.ratio = c.best / c.other
			if !pattern.HigherIsBetter() {
				c.ratio = c.other / c.best
			}
		}
		rows = append(rows, c)
	}
	if len(rows) == 0 {
		return nil, "", errors.New("no message size is present in every result")
	}
	return rows, pattern, nil
}

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
	minRatio, minSize, logSum, n := math.Inf(1), 0, 0.0, 0
	for _, c := range rows {
		if math.IsNaN(c.ratio) {
			continue
		}
		if c.ratio < minRatio {
			minRatio, minSize = c.ratio, c.size
		}
		logSum += math.Log(c.ratio)
		n++
	}
	if n == 0 {
		return fmt.Sprintf("%s: no size has a ratio (a best median is not positive)", pattern)
	}
	return fmt.Sprintf("%s (%s): min ratio %.3f at %s, geomean %.3f over %d sizes (> 1: ours better)",
		pattern, pattern.Unit(), minRatio, transports.FormatSize(minSize), math.Exp(logSum/float64(n)), n)
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
