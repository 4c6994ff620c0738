package htmlreport

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/compare"
)

// compareView is a comparison's section: per table its overlaid curves
// and its ratio plot, and the table itself.
type compareView struct {
	Tables []compareTable
}

type compareTable struct {
	compare.Table
	Title  string
	Curves Figure
	Ratios *Figure // nil with one side
}

// WriteCompare draws bench/compare tables into out/report.html: per
// (pattern, unit) every side's medians with their intervals overlaid, and
// each side's ratio to the reference (the first side) with its U-test
// verdicts in the table. It returns the report's path.
func WriteCompare(out string, tables []compare.Table) (string, error) {
	if len(tables) == 0 {
		return "", fmt.Errorf("report: nothing to compare")
	}
	cv := &compareView{}
	var figs []Figure
	var names []string
	for _, s := range tables[0].Sides {
		names = append(names, s.Name)
	}
	for _, t := range tables {
		ct, err := compareFigures(t)
		if err != nil {
			return "", err
		}
		cv.Tables = append(cv.Tables, ct)
		figs = append(figs, ct.Curves)
		if ct.Ratios != nil {
			figs = append(figs, *ct.Ratios)
		}
	}
	var ids []string
	for _, f := range figs {
		ids = append(ids, f.ID)
	}
	if dup := duplicate(ids); dup != "" {
		return "", fmt.Errorf("report: two plots named %s", dup)
	}
	data := pageData{Title: "gotune compare: " + strings.Join(names, " vs "), Compare: cv, Generated: time.Now().UTC().Format(time.RFC3339)}
	return writePage(out, data, figs)
}

// compareFigures draws one table.
func compareFigures(t compare.Table) (compareTable, error) {
	ct := compareTable{Table: t, Title: fmt.Sprintf("%s (%s)", t.Measure(), t.Unit)}
	better := "lower is better"
	if t.HigherIsBetter {
		better = "higher is better"
	}
	c := chart{title: ct.Title, xlabel: "message size (bytes)", ylabel: fmt.Sprintf("%s (%s), %s", t.Measure(), t.Unit, better), sizeX: true, logY: true}
	for i, s := range t.Sides {
		l := line{label: s.Name, bold: i == 0}
		for _, r := range t.Rows {
			cell := r.Cells[i]
			if cell.N == 0 {
				continue
			}
			lo, hi := cell.CILow, cell.CIHigh
			if math.IsNaN(lo) || math.IsNaN(hi) {
				lo, hi = cell.Median, cell.Median
			}
			l.pts = append(l.pts, xy{x: float64(r.Size), y: cell.Median, lo: lo, hi: hi})
		}
		if i == 0 {
			l.label += " (reference)"
			l.bold = false
		}
		c.lines = append(c.lines, l)
	}
	id := figureID("compare", t.Measure(), t.Unit)
	svg, err := c.svg()
	if err != nil {
		return ct, err
	}
	ct.Curves = Figure{ID: id, Title: c.title, SVG: svg,
		Caption: "Median of each side's pooled samples at each size; band: its interval (95% where there are enough samples)."}
	if len(t.Sides) < 2 {
		return ct, nil
	}
	r := chart{title: ct.Title + ": ratio to " + t.Sides[0].Name, xlabel: "message size (bytes)",
		ylabel: "ratio of medians (> 1: better than " + t.Sides[0].Name + ")", sizeX: true,
		hmarks: []hmark{{y: 1, label: "same as " + t.Sides[0].Name}}}
	for i, s := range t.Sides {
		if i == 0 {
			continue
		}
		l := line{label: s.Name}
		for _, row := range t.Rows {
			v := row.Cells[i].Ratio
			if !math.IsNaN(v) && v > 0 {
				l.pts = append(l.pts, xy{x: float64(row.Size), y: v, lo: v, hi: v})
			}
		}
		r.lines = append(r.lines, l)
	}
	rsvg, err := r.svg()
	if err != nil {
		return ct, err
	}
	ct.Ratios = &Figure{ID: id + "-ratio", Title: r.title, SVG: rsvg,
		Caption: "Each side's median over the reference's, oriented so that above 1 is better whatever the unit; the table gives each size's U-test verdict."}
	return ct, nil
}

// RunResults reads a run directory as a side of a comparison: its
// verification trials of auto (what its profile delivers), or for a
// verification's run directory the same; each trial a result. It is an
// error when the run has none (a sweep whose verification the budget cut).
func RunResults(dir string) ([]bench.Result, error) {
	run, err := readRun(dir)
	if err != nil {
		return nil, err
	}
	var out []bench.Result
	for _, t := range run.Trials {
		if t.Stage != "verify" || t.Candidate != "auto" || t.Failed != "" || len(t.Points) == 0 {
			continue
		}
		out = append(out, bench.Result{Label: run.Meta.RunID + " auto", Provenance: run.Meta.Provenance,
			Spec: bench.Spec{Transport: t.Transport, Options: t.Options, Pattern: t.Pattern, Sizes: t.Sizes}, Points: t.Points})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no verification trials of auto to compare (gotune verify measures a profile)", dir)
	}
	return out, nil
}
