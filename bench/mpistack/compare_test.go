package mpistack

import (
	"math"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
)

// result builds a result whose point at each size has the given median.
func result(label string, p bench.Pattern, medians map[int]float64, sizes ...int) bench.Result {
	r := bench.Result{Label: label, Spec: bench.Spec{Pattern: p}}
	for _, s := range sizes {
		r.Points = append(r.Points, bench.Point{Size: s, Unit: p.Unit(), Median: medians[s]})
	}
	return r
}

func TestCompareRatios(t *testing.T) {
	type want struct {
		size        int
		best, other float64
		ratio       float64
	}
	tests := []struct {
		name         string
		ours, theirs []bench.Result
		want         []want
	}{{
		name: "latency: lower is better, ratio theirs/ours",
		ours: []bench.Result{
			result("gotune sm", bench.Latency, map[int]float64{8: 0.2, 64: 0.5}, 8, 64),
			result("gotune cma", bench.Latency, map[int]float64{8: 0.4, 64: 0.25}, 8, 64),
		},
		theirs: []bench.Result{
			result("openmpi vader cma", bench.Latency, map[int]float64{8: 0.3, 64: 0.6}, 8, 64),
			result("openmpi vader none", bench.Latency, map[int]float64{8: 0.25, 64: 1}, 8, 64),
		},
		want: []want{{8, 0.2, 0.25, 1.25}, {64, 0.25, 0.6, 2.4}},
	}, {
		name: "bandwidth: higher is better, ratio ours/theirs; sizes not everywhere are left out",
		ours: []bench.Result{
			result("gotune sm", bench.Bandwidth, map[int]float64{4096: 5000, 65536: 20000, 1 << 20: 9000}, 4096, 65536, 1<<20),
		},
		theirs: []bench.Result{
			result("openmpi vader cma", bench.Bandwidth, map[int]float64{4096: 4000, 65536: 25000}, 4096, 65536),
			result("openmpi vader none", bench.Bandwidth, map[int]float64{4096: 2500, 65536: 10000, 1 << 20: 8000}, 4096, 65536, 1<<20),
		},
		want: []want{{4096, 5000, 4000, 1.25}, {65536, 20000, 25000, 0.8}},
	}, {
		name: "message rate: higher is better; a zero median has no ratio",
		ours: []bench.Result{
			result("gotune sm", bench.MsgRate, map[int]float64{0: 0, 8: 3e7}, 0, 8),
		},
		theirs: []bench.Result{
			result("openmpi vader cma", bench.MsgRate, map[int]float64{0: 1e7, 8: 2e7}, 0, 8),
		},
		want: []want{{0, 0, 1e7, math.NaN()}, {8, 3e7, 2e7, 1.5}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, _, err := compare(tt.ours, tt.theirs)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != len(tt.want) {
				t.Fatalf("got %d rows, want %d", len(rows), len(tt.want))
			}
			for i, w := range tt.want {
				r := rows[i]
				sameRatio := math.Abs(r.ratio-w.ratio) < 1e-12 || math.IsNaN(r.ratio) && math.IsNaN(w.ratio)
				if r.size != w.size || r.best != w.best || r.other != w.other || !sameRatio {
					t.Errorf("row %d: got size %d best %v/%v ratio %v, want size %d best %v/%v ratio %v",
						i, r.size, r.best, r.other, r.ratio, w.size, w.best, w.other, w.ratio)
				}
				if len(r.medians) != len(tt.ours)+len(tt.theirs) {
					t.Errorf("row %d: %d medians for %d results", i, len(r.medians), len(tt.ours)+len(tt.theirs))
				}
			}
		})
	}
}

func TestCompareTable(t *testing.T) {
	ours := []bench.Result{result("gotune sm", bench.Bandwidth, map[int]float64{4096: 5000, 65536: 20000}, 4096, 65536)}
	theirs := []bench.Result{result("openmpi vader cma", bench.Bandwidth, map[int]float64{4096: 4000, 65536: 25000}, 4096, 65536)}
	var b strings.Builder
	if err := Compare(&b, ours, theirs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, w := range []string{"Size", "gotune sm", "openmpi vader cma", "best ours", "best theirs", "ratio",
		"64K", "25000", "1.250", "0.800", "min ratio 0.800 at 64K, geomean 1.000 over 2 sizes"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestCompareRejects(t *testing.T) {
	lat := result("a", bench.Latency, map[int]float64{8: 1}, 8)
	tests := []struct {
		name         string
		ours, theirs []bench.Result
		want         string
	}{
		{"no theirs", []bench.Result{lat}, nil, "at least one result on each side"},
		{"mixed patterns", []bench.Result{lat}, []bench.Result{result("b", bench.Bandwidth, nil, 8)}, "measures bw"},
		{"no common size", []bench.Result{lat}, []bench.Result{result("b", bench.Latency, nil, 64)}, "no message size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Compare(&strings.Builder{}, tt.ours, tt.theirs)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// rounds builds a result from one sample per round, as Interleave pools
// them.
func roundsResult(label string, p bench.Pattern, size int, samples ...float64) bench.Result {
	return bench.Result{Label: label, Spec: bench.Spec{Pattern: p}, Points: []bench.Point{bench.Summarize(size, p.Unit(), samples, nil)}}
}

// A slow spell over rounds 2-3 of ours and 4-5 of theirs: the ratio of
// medians says ours is half as fast, the round-paired ratio sees ours 10%
// ahead in the rounds where both ran in the same phase; for latency the
// ratio is inverted the same way. Without a sample per round on both
// sides there is no paired ratio.
func TestCompareRoundPaired(t *testing.T) {
	tests := []struct {
		name         string
		ours, theirs []bench.Result
		ratio        float64
		paired       float64
	}{{
		name:   "bandwidth",
		ours:   []bench.Result{roundsResult("gotune sm", bench.Bandwidth, 4096, 110, 55, 55, 110, 110)},
		theirs: []bench.Result{roundsResult("openmpi", bench.Bandwidth, 4096, 100, 100, 100, 50, 50)},
		ratio:  1.1, paired: 1.1,
	}, {
		name: "bandwidth, phases splitting the medians",
		ours: []bench.Result{roundsResult("gotune sm", bench.Bandwidth, 4096, 110, 55, 55, 55, 110),
			roundsResult("gotune cma", bench.Bandwidth, 4096, 10, 10, 10, 10, 10)},
		theirs: []bench.Result{roundsResult("openmpi", bench.Bandwidth, 4096, 100, 100, 100, 50, 50)},
		ratio:  0.55, paired: 1.1,
	}, {
		name:   "latency",
		ours:   []bench.Result{roundsResult("gotune sm", bench.Latency, 8, 0.1, 0.2, 0.2, 0.2, 0.1)},
		theirs: []bench.Result{roundsResult("openmpi", bench.Latency, 8, 0.12, 0.12, 0.12, 0.24, 0.24)},
		ratio:  0.6, paired: 1.2,
	}, {
		name:   "unequal rounds",
		ours:   []bench.Result{roundsResult("gotune sm", bench.Bandwidth, 4096, 110, 110, 110)},
		theirs: []bench.Result{roundsResult("openmpi", bench.Bandwidth, 4096, 100, 100)},
		ratio:  1.1, paired: math.NaN(),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, _, err := compare(tt.ours, tt.theirs)
			if err != nil {
				t.Fatal(err)
			}
			near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 || math.IsNaN(a) && math.IsNaN(b) }
			if len(rows) != 1 || !near(rows[0].ratio, tt.ratio) || !near(rows[0].paired, tt.paired) {
				t.Fatalf("rows %+v; want ratio %v, paired %v", rows, tt.ratio, tt.paired)
			}
		})
	}
	var b strings.Builder
	if err := Compare(&b, tests[1].ours, tests[1].theirs); err != nil {
		t.Fatal(err)
	}
	if want := "bw round-paired: min 1.100 at 4K, geomean 1.100 over 1 sizes"; !strings.Contains(b.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, b.String())
	}
}
