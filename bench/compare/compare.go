package compare

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"golang.org/x/perf/benchmath"

	"github.com/gotune/gotune/bench"
)

// Alpha is the significance level of the U test: p below it rejects "the
// two sides measure the same distribution".
const Alpha = 0.05

// Noise is the relative difference of medians within which two sides are
// the same whatever the test says: the tuner's 3% (tuner/search.Noise),
// because a real 1% difference decides nothing about a stack.
const Noise = 0.03

// Verdict is the outcome of one side against the reference at one size.
type Verdict string

const (
	Better    Verdict = "better"           // p < Alpha, the side's median better by more than Noise
	Worse     Verdict = "worse"            // p < Alpha, worse by more than Noise
	Same      Verdict = "same"             // medians within Noise
	Unsettled Verdict = "unsettled"        // apart by more than Noise, the test cannot tell
	OneSample Verdict = "n/a (one sample)" // a side has fewer than 2 samples: no test
)

// Side is one column of a comparison: a name and the results it pools.
type Side struct {
	Name    string
	Results []bench.Result
}

// Table compares the sides at one (pattern, unit).
type Table struct {
	Pattern        bench.Pattern
	Metric         string // bench.Result.Metric of the results compared ("": the pattern's own)
	Unit           string
	HigherIsBetter bool
	Sides          []SideSummary // in argument order; Sides[0] is the reference
	Rows           []Row         // one per size of the reference, ascending
	// Notes say what a reader should know about the numbers, e.g. that a
	// side pooled results with different labels.
	Notes []string
}

// SideSummary is a side's name and, against the reference, the geometric
// mean of its ratios.
type SideSummary struct {
	Name string
	// Geomean of the ratios (> 1: this side is better) over Sizes sizes
	// that both this side and the reference have; NaN for the reference
	// and for a side without such a size.
	Geomean float64
	Sizes   int
}

// Row is one message size: a cell per side.
type Row struct {
	Size  int
	Cells []Cell // indexed like Table.Sides
}

// Cell is one side at one size.
type Cell struct {
	N       int       // samples pooled; 0: the side lacks this size
	Samples []float64 // pooled, in the order of the side's results
	Median  float64
	// CILow and CIHigh bound the median with probability Confidence: the
	// 95% distribution-free interval when there are enough samples, else
	// [min, max] with its true, lower level (as bench.Summarize reports
	// it); NaN with one sample.
	CILow, CIHigh, Confidence float64
	// Ratio is the median against the reference's, oriented so that > 1
	// means this side is better (time: reference/side; rates:
	// side/reference); NaN for the reference, a missing cell or a median
	// that is not positive.
	Ratio   float64
	Verdict Verdict // empty for the reference and a missing cell
	P       float64 // the U test's p-value; NaN when no test was made
}

// HigherIsBetter says how a unit compares: times are better lower, rates
// (bytes or messages per second) higher. It is the one place that knows,
// so that every imported pattern compares by what it measures.
func HigherIsBetter(unit string) (bool, error) {
	switch unit {
	case "ns", "us", "µs", "ms", "s":
		return false, nil
	case "B/s", "KB/s", "MB/s", "GB/s", "KiB/s", "MiB/s", "GiB/s", "msg/s":
		return true, nil
	}
	return false, fmt.Errorf("unknown unit %q: cannot tell whether higher is better (want a time: ns, us, ms, s; or a rate: MB/s, GB/s, msg/s)", unit)
}

// Measure names what t compares: the pattern, and the metric where the
// results name one ("all_reduce float/sum out-of-place busbw").
func (t Table) Measure() string {
	if t.Metric == "" {
		return string(t.Pattern)
	}
	return string(t.Pattern) + " " + t.Metric
}

// groupKey is what pools: one pattern's metric measured in one unit.
type groupKey struct {
	pattern bench.Pattern
	metric  string // bench.Result.Metric: "" for the pattern's own
	unit    string
}

// group is one side's pooled samples of a key.
type group struct {
	samples map[int][]float64 // by size
	labels  []string          // of the results pooled, first appearance order
}

// pool groups a side's results by (pattern, unit of the point) and pools
// the samples of each size; order lists the keys as first seen.
func pool(s Side) (groups map[groupKey]*group, order []groupKey, err error) {
	groups = map[groupKey]*group{}
	for _, r := range s.Results {
		for _, p := range r.Points {
			unit := p.Unit
			if unit == "" && slices.Contains(bench.Patterns, r.Spec.Pattern) {
				unit = r.Spec.Pattern.Unit() // a gotune pattern's own unit
			}
			if unit == "" {
				return nil, nil, fmt.Errorf("side %q, result %q, size %d: the point has no unit", s.Name, r.Label, p.Size)
			}
			for _, v := range p.Samples {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, nil, fmt.Errorf("side %q, result %q, size %d: sample %v is not a number", s.Name, r.Label, p.Size, v)
				}
			}
			if len(p.Samples) == 0 {
				continue // nothing measured at this size
			}
			k := groupKey{r.Spec.Pattern, r.Metric, unit}
			g := groups[k]
			if g == nil {
				g = &group{samples: map[int][]float64{}}
				groups[k] = g
				order = append(order, k)
			}
			g.samples[p.Size] = append(g.samples[p.Size], p.Samples...)
			if !slices.Contains(g.labels, r.Label) {
				g.labels = append(g.labels, r.Label)
			}
		}
	}
	return groups, order, nil
}

// Build compares sides: sides[0] is the reference. It makes a Table per
// (pattern, unit) of the reference that at least one other side has, in
// the order the reference's results first show them, with a row per size
// of the reference.
func Build(sides []Side) ([]Table, error) {
	if len(sides) < 2 {
		return nil, fmt.Errorf("compare: need at least two sides, have %d", len(sides))
	}
	var names []string
	pooled := make([]map[groupKey]*group, len(sides))
	var refOrder []groupKey
	for i, s := range sides {
		if s.Name == "" {
			return nil, fmt.Errorf("compare: side %d has no name", i+1)
		}
		if slices.Contains(names, s.Name) {
			return nil, fmt.Errorf("compare: two sides are named %q (name them apart)", s.Name)
		}
		names = append(names, s.Name)
		groups, order, err := pool(s)
		if err != nil {
			return nil, fmt.Errorf("compare: %w", err)
		}
		if len(groups) == 0 {
			return nil, fmt.Errorf("compare: side %q holds no samples", s.Name)
		}
		pooled[i] = groups
		if i == 0 {
			refOrder = order
		}
	}
	var tables []Table
	for _, k := range refOrder {
		shared := false
		for _, g := range pooled[1:] {
			shared = shared || g[k] != nil
		}
		if !shared {
			continue
		}
		t, err := build(k, names, pooled)
		if err != nil {
			return nil, fmt.Errorf("compare: %s (%s): %w", k.pattern, k.unit, err)
		}
		tables = append(tables, t)
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("compare: no other side measures a pattern and unit of the reference %q", sides[0].Name)
	}
	return tables, nil
}

// build makes the table of one key.
func build(k groupKey, names []string, pooled []map[groupKey]*group) (Table, error) {
	higher, err := HigherIsBetter(k.unit)
	if err != nil {
		return Table{}, err
	}
	t := Table{Pattern: k.pattern, Metric: k.metric, Unit: k.unit, HigherIsBetter: higher}
	ref := pooled[0][k]
	var sizes []int
	for size := range ref.samples {
		sizes = append(sizes, size)
	}
	slices.Sort(sizes)
	for _, size := range sizes {
		row := Row{Size: size}
		for i := range names {
			var samples []float64
			if g := pooled[i][k]; g != nil {
				samples = g.samples[size]
			}
			c := summarize(size, k.unit, samples)
			if i > 0 && c.N > 0 {
				compareCell(&c, row.Cells[0], higher)
			}
			row.Cells = append(row.Cells, c)
		}
		t.Rows = append(t.Rows, row)
	}
	for i, name := range names {
		s := SideSummary{Name: name, Geomean: math.NaN()}
		if i > 0 {
			logSum := 0.0
			for _, row := range t.Rows {
				if r := row.Cells[i].Ratio; !math.IsNaN(r) {
					logSum += math.Log(r)
					s.Sizes++
				}
			}
			if s.Sizes > 0 {
				s.Geomean = math.Exp(logSum / float64(s.Sizes))
			}
		}
		t.Sides = append(t.Sides, s)
		if g := pooled[i][k]; g != nil && len(g.labels) > 1 {
			t.Notes = append(t.Notes, fmt.Sprintf("%s pools %d results with different labels: %s", name, len(g.labels), strings.Join(g.labels, "; ")))
		}
	}
	return t, nil
}

// summarize is a cell's own statistics: the median and its interval,
// computed as bench.Summarize computes a point's.
func summarize(size int, unit string, samples []float64) Cell {
	c := Cell{N: len(samples), Samples: samples, Median: math.NaN(), CILow: math.NaN(), CIHigh: math.NaN(), Ratio: math.NaN(), P: math.NaN()}
	switch len(samples) {
	case 0:
	case 1:
		c.Median = samples[0] // one value has no interval
	default:
		p := bench.Summarize(size, unit, slices.Clone(samples), nil)
		c.Median, c.CILow, c.CIHigh, c.Confidence = p.Median, p.CILow, p.CIHigh, p.Confidence
	}
	return c
}

// compareCell fills a non-reference cell's ratio, verdict and p against
// the reference cell ref.
func compareCell(c *Cell, ref Cell, higher bool) {
	if ref.N == 0 {
		return
	}
	if c.Median > 0 && ref.Median > 0 {
		c.Ratio = ref.Median / c.Median
		if higher {
			c.Ratio = c.Median / ref.Median
		}
	}
	c.Verdict, c.P = Decide(ref.Samples, c.Samples, c.Ratio)
}

// Decide is the verdict on a side's samples against the reference's, given
// the oriented ratio of their medians (> 1: the side is better; NaN: no
// ratio), and the U test's p-value (NaN when no test was made). With fewer
// than two samples on either side there is no test: one value says
// nothing about its spread.
func Decide(ref, side []float64, ratio float64) (Verdict, float64) {
	if len(ref) < 2 || len(side) < 2 {
		return OneSample, math.NaN()
	}
	a := benchmath.NewSample(slices.Clone(ref), &benchmath.DefaultThresholds)
	b := benchmath.NewSample(slices.Clone(side), &benchmath.DefaultThresholds)
	cmp := benchmath.AssumeNothing.Compare(a, b) // P = 1 when every value is equal
	switch gain := ratio - 1; {
	case math.IsNaN(gain):
		return Unsettled, cmp.P
	case math.Abs(gain) <= Noise:
		return Same, cmp.P
	case cmp.P < Alpha && gain > 0:
		return Better, cmp.P
	case cmp.P < Alpha:
		return Worse, cmp.P
	default:
		return Unsettled, cmp.P
	}
}
