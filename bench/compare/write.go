package compare

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/gotune/gotune/bench/output"
	"github.com/gotune/gotune/transports"
)

// errFormat is returned by Write for an unknown format.
var errFormat = errors.New("unknown format")

// formats are Write's renderers.
var formats = []output.Format[[]Table]{
	{Name: "table", Write: writeTable}, {Name: "markdown", Write: writeMarkdown},
	{Name: "csv", Write: writeCSV}, {Name: "bench", Write: writeBench},
}

// Formats lists Write's formats.
var Formats = output.FormatNames(formats)

// Write renders tables in format: "table" (aligned text), "markdown"
// (GitHub pipe tables), "csv" (a row per size and side) or "bench" (the Go
// benchmark format, a line per sample, for benchstat).
func Write(w io.Writer, format string, tables []Table) error {
	found, err := output.Render(w, formats, format, tables)
	switch {
	case !found:
		return fmt.Errorf("compare: %w %q (want one of %s)", errFormat, format, strings.Join(Formats, ", "))
	case err != nil:
		return fmt.Errorf("compare: %s: %w", format, err)
	}
	return nil
}

// title names a table's metric, its direction and the reference.
func title(t Table) string {
	dir := "lower is better"
	if t.HigherIsBetter {
		dir = "higher is better"
	}
	return fmt.Sprintf("%s (%s, %s); reference: %s", t.Measure(), t.Unit, dir, t.Sides[0].Name)
}

// header is the columns of the table and markdown formats: the size, the
// reference, then per other side its cell, ratio and verdict.
func header(t Table) []string {
	h := []string{"size", t.Sides[0].Name + " (ref)"}
	for _, s := range t.Sides[1:] {
		h = append(h, s.Name, "ratio", "verdict")
	}
	return h
}

// textRow is a row of the table and markdown formats.
func textRow(r Row) []string {
	row := []string{transports.FormatSize(r.Size)}
	for i, c := range r.Cells {
		row = append(row, formatCell(c))
		if i > 0 {
			row = append(row, formatRatio(c.Ratio), formatVerdict(c))
		}
	}
	return row
}

// missing marks a size a side lacks.
const missing = "–"

// formatCell is a side's median, its interval and how many samples: the
// interval's level is shown when it is not the 95% asked for (too few
// samples: [min, max] at its true level).
func formatCell(c Cell) string {
	switch {
	case c.N == 0:
		return missing
	case c.N == 1:
		return formatValue(c.Median) + " n=1 (no CI)"
	}
	s := fmt.Sprintf("%s [%s, %s] n=%d", formatValue(c.Median), formatValue(c.CILow), formatValue(c.CIHigh), c.N)
	if math.Abs(c.Confidence-0.95) > 1e-9 {
		s += fmt.Sprintf(" @%.1f%%", 100*c.Confidence)
	}
	return s
}

func formatVerdict(c Cell) string {
	switch {
	case c.N == 0:
		return missing
	case math.IsNaN(c.P):
		return string(c.Verdict)
	}
	return fmt.Sprintf("%s p=%.3f", c.Verdict, c.P)
}

// formatValue keeps about four significant digits without exponents.
func formatValue(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

// formatRatio gives three decimals, or three significant digits below 0.1
// so that a side thousands of times worse does not read 0.000.
func formatRatio(r float64) string {
	switch {
	case math.IsNaN(r):
		return missing
	case r < 0.1:
		return strconv.FormatFloat(r, 'g', 3, 64)
	}
	return strconv.FormatFloat(r, 'f', 3, 64)
}

// legend explains the cells of the table and markdown formats.
const legend = "cells: median [interval of the median] n=samples; @L%: the interval's level when there are too few samples for 95% ([min, max]); " +
	"ratio > 1: better than the reference; verdict: Mann-Whitney U test at p < 0.05 with medians more than 3% apart, same within 3%"

// geomeans is the line under a table: per other side, the geometric mean
// of its ratios.
func geomeans(t Table) string {
	var parts []string
	for _, s := range t.Sides[1:] {
		if s.Sizes == 0 {
			parts = append(parts, s.Name+" –")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.3f over %d sizes", s.Name, s.Geomean, s.Sizes))
	}
	return fmt.Sprintf("geomean ratio (> 1: better than %s): %s", t.Sides[0].Name, strings.Join(parts, ", "))
}

func writeTable(w io.Writer, tables []Table) error {
	for i, t := range tables {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, title(t))
		tab := tablewriter.NewTable(w,
			tablewriter.WithHeaderAutoFormat(tw.Off),
			tablewriter.WithRowAlignment(tw.AlignRight))
		tab.Header(header(t))
		for _, r := range t.Rows {
			if err := tab.Append(textRow(r)); err != nil {
				return fmt.Errorf("%s: %w", title(t), err)
			}
		}
		if err := tab.Render(); err != nil {
			return fmt.Errorf("%s: %w", title(t), err)
		}
		fmt.Fprintln(w, geomeans(t))
		for _, n := range t.Notes {
			fmt.Fprintln(w, "note:", n)
		}
	}
	fmt.Fprintf(w, "\n%s\n", legend)
	return nil
}

func writeMarkdown(w io.Writer, tables []Table) error {
	cells := func(row []string) string {
		for i, c := range row {
			row[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		return "| " + strings.Join(row, " | ") + " |"
	}
	for i, t := range tables {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "### %s\n\n", title(t))
		h := header(t)
		fmt.Fprintln(w, cells(h))
		align := make([]string, len(h))
		for i := range align {
			align[i] = "---:"
		}
		fmt.Fprintln(w, "|"+strings.Join(align, "|")+"|")
		for _, r := range t.Rows {
			fmt.Fprintln(w, cells(textRow(r)))
		}
		fmt.Fprintf(w, "\n%s\n", geomeans(t))
		for _, n := range t.Notes {
			fmt.Fprintf(w, "\nNote: %s\n", n)
		}
	}
	fmt.Fprintf(w, "\n_%s._\n", legend)
	return nil
}

// csvHeader names writeCSV's columns. ci_level is the interval's true
// level; ratio, verdict and p are empty for the reference; a size a side
// lacks has n 0 and nothing else.
var csvHeader = []string{"pattern", "unit", "higher_is_better", "reference", "size", "side", "n", "median", "ci_low", "ci_high", "ci_level", "ratio", "verdict", "p"}

func writeCSV(w io.Writer, tables []Table) error {
	cw := csv.NewWriter(w)
	num := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, t := range tables {
		for _, r := range t.Rows {
			for i, c := range r.Cells {
				rec := []string{t.Measure(), t.Unit, strconv.FormatBool(t.HigherIsBetter), t.Sides[0].Name,
					strconv.Itoa(r.Size), t.Sides[i].Name, strconv.Itoa(c.N), "", "", "", "", "", "", ""}
				if c.N > 0 {
					rec[7], rec[8], rec[9] = num(c.Median), num(c.CILow), num(c.CIHigh)
					if c.N > 1 {
						rec[10] = num(c.Confidence)
					}
					rec[11], rec[12], rec[13] = num(c.Ratio), string(c.Verdict), num(c.P)
				}
				if err := cw.Write(rec); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// nsPer converts a time unit to nanoseconds.
var nsPer = map[string]float64{"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}

// writeBench writes the Go benchmark format as report's bench format
// does: a line per sample, times as ns/op, rates in their own unit with a
// "better=higher" unit line, 12 significant digits. The name is
// BenchmarkCompare/pattern=P/side=NAME/size=N, so `benchstat -col /side`
// puts the sides side by side; the side goes before the size because
// benchfmt reads a name's trailing "-N" as GOMAXPROCS (a side "node-2").
func writeBench(w io.Writer, tables []Table) error {
	declared := map[string]bool{}
	for _, t := range tables {
		if _, isTime := nsPer[t.Unit]; !isTime && !declared[t.Unit] {
			declared[t.Unit] = true
			fmt.Fprintf(w, "Unit %s better=higher\n", t.Unit)
		}
	}
	fmt.Fprintln(w, "pkg: github.com/gotune/gotune")
	for _, t := range tables {
		fmt.Fprintf(w, "reference: %s\n", benchValue(t.Sides[0].Name))
		for _, r := range t.Rows {
			for i, c := range r.Cells {
				for _, v := range c.Samples {
					unit := t.Unit
					if ns, isTime := nsPer[unit]; isTime {
						v, unit = v*ns, "ns/op"
					}
					fmt.Fprintf(w, "BenchmarkCompare/pattern=%s/side=%s/size=%d 1 %s %s\n",
						benchValue(t.Measure()), benchValue(t.Sides[i].Name), r.Size, strconv.FormatFloat(v, 'g', 12, 64), unit)
				}
			}
		}
	}
	return nil
}

// benchValue makes a name usable as one key's value of a benchmark name:
// no white space (it ends the name) and no "/" (it starts the next key).
func benchValue(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == '\t' || r == '\n' || r == '\r' {
			return '_'
		}
		return r
	}, s)
}
