package compare_test

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/compare"
	"github.com/gotune/gotune/bench/importer"
	"github.com/gotune/gotune/bench/output"
)

var update = flag.Bool("update", false, "rewrite golden files")

const osuFixtures = "../importer/testdata/osu"

// load reads a side's files: gotune JSON lines (.jsonl) or another tool's
// output.
func load(t *testing.T, name string, paths ...string) compare.Side {
	t.Helper()
	s := compare.Side{Name: name}
	for _, path := range paths {
		var results []bench.Result
		if strings.HasSuffix(path, ".jsonl") {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			results, err = output.ReadJSON(path, f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
		} else {
			var err error
			if _, results, err = importer.File(path); err != nil {
				t.Fatal(err)
			}
		}
		s.Results = append(s.Results, results...)
	}
	return s
}

// acceptanceSides are the comparison of issue 29's acceptance: Open MPI
// (the reference: two OMB builds' osu_latency and osu_bw and osu_bw -c on
// one VM, pooled as repeated runs), MPICH (one osu_latency) and a gotune
// run (testdata/gotune_sm.jsonl: 5 samples per size).
func acceptanceSides(t *testing.T) []compare.Side {
	osu := func(f string) string { return filepath.Join(osuFixtures, f) }
	return []compare.Side{
		load(t, "openmpi", osu("osu_latency_7.4.txt"), osu("osu_latency_7.0.txt"), osu("osu_bw_7.4.txt"), osu("osu_bw_c_7.4.txt")),
		load(t, "mpich", osu("osu_latency_7.4_mpich.txt")),
		load(t, "gotune", "testdata/gotune_sm.jsonl"),
	}
}

// near compares to 1e-9 relative, the precision of the hand computations.
func near(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func cell(t *testing.T, tab compare.Table, size int, side string) compare.Cell {
	t.Helper()
	si := -1
	for i, s := range tab.Sides {
		if s.Name == side {
			si = i
		}
	}
	for _, r := range tab.Rows {
		if r.Size == size && si >= 0 {
			return r.Cells[si]
		}
	}
	t.Fatalf("%s: no cell for size %d, side %q", tab.Pattern, size, side)
	return compare.Cell{}
}

func TestAcceptance(t *testing.T) {
	tables, err := compare.Build(acceptanceSides(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 2 {
		t.Fatalf("%d tables, want latency and bw", len(tables))
	}
	lat, bw := tables[0], tables[1]
	if lat.Pattern != bench.Latency || lat.Unit != "us" || lat.HigherIsBetter || bw.Pattern != bench.Bandwidth || bw.Unit != "MB/s" || !bw.HigherIsBetter {
		t.Fatalf("tables %s (%s) and %s (%s)", lat.Pattern, lat.Unit, bw.Pattern, bw.Unit)
	}
	if len(lat.Rows) != 13 || len(bw.Rows) != 17 {
		t.Errorf("%d latency rows (want 13: 1 to 4K), %d bw rows (want 17: 1 to 64K)", len(lat.Rows), len(bw.Rows))
	}
	nan := math.NaN()
	p221 := 2.0 / 21 // U test, 2 vs 5 samples fully apart: 2 of C(7,2) = 21 orderings are as extreme
	cases := []struct {
		tab     compare.Table
		size    int
		side    string
		n       int
		median  float64
		ratio   float64
		verdict compare.Verdict
		p       float64
		why     string
	}{
		// The reference pools OMB 7.4 and 7.0: sizes to 1K have two samples.
		{lat, 1, "openmpi", 2, 0.27, nan, "", nan, "median of 0.26 (7.4) and 0.28 (7.0)"},
		{lat, 4096, "openmpi", 1, 1.28, nan, "", nan, "only 7.4 ran 4K"},
		// MPICH has one sample per size: ratios, never a test.
		{lat, 1, "mpich", 1, 5694.62, 0.27 / 5694.62, compare.OneSample, nan, "0.27/5694.62 = 4.7413e-5: MPICH waited for the CPU"},
		{lat, 16, "mpich", 1, 0.35, 0.305 / 0.35, compare.OneSample, nan, "(0.30+0.31)/2 = 0.305; 0.305/0.35 = 0.8714"},
		{lat, 1024, "mpich", 1, 1.21, 0.72 / 1.21, compare.OneSample, nan, "(0.71+0.73)/2 = 0.72; 0.72/1.21 = 0.5950"},
		{lat, 2048, "mpich", 0, nan, nan, "", nan, "MPICH stopped at 1K"},
		// gotune, 5 samples, against the pooled pair.
		{lat, 1, "gotune", 5, 0.22, 0.27 / 0.22, compare.Unsettled, p221,
			"0.20..0.24, median 0.22; 0.27/0.22 = 1.2273 (22.7% better) but 2 vs 5 samples cannot reach p < 0.05"},
		{lat, 2, "gotune", 5, 0.276, 0.275 / 0.276, compare.Same, 1,
			"ref 0.26, 0.29 → 0.275; gotune 0.268..0.284 → 0.276; 0.275/0.276 = 0.9964; ref ranks 1 and 7 sum to their mean 8: p = 1"},
		{lat, 1024, "gotune", 5, 0.84, 0.72 / 0.84, compare.Unsettled, p221, "0.72/0.84 = 0.8571 (14% worse), p = 2/21"},
		{lat, 4096, "gotune", 5, 1.10, 1.28 / 1.10, compare.OneSample, nan, "1.28/1.10 = 1.1636; the reference has one sample"},
		// Bandwidth: higher is better, the ratio is gotune/openmpi.
		{bw, 4096, "openmpi", 2, (5659.58 + 5441.73) / 2, nan, "", nan, "osu_bw 5659.58, osu_bw -c 5441.73 → 5550.655"},
		{bw, 4096, "gotune", 5, 6200, 6200 / 5550.655, compare.Unsettled, p221, "6200/5550.655 = 1.1170, both gotune-favoured orderings: p = 2/21"},
		{bw, 65536, "gotune", 5, 24100, 24100 / 24082.155, compare.Same, 1,
			"24100/((24107.76+24056.55)/2) = 1.00074; ref ranks 3 and 5 of 7 sum to the mean 8: p = 1"},
		{bw, 4096, "mpich", 0, nan, nan, "", nan, "MPICH ran no osu_bw"},
	}
	for _, c := range cases {
		got := cell(t, c.tab, c.size, c.side)
		if got.N != c.n || !near(got.Median, c.median) || !near(got.Ratio, c.ratio) || got.Verdict != c.verdict || !near(got.P, c.p) {
			t.Errorf("%s size %d %s: n=%d median %v ratio %v %q p=%v; want n=%d median %v ratio %v %q p=%v (%s)",
				c.tab.Pattern, c.size, c.side, got.N, got.Median, got.Ratio, got.Verdict, got.P, c.n, c.median, c.ratio, c.verdict, c.p, c.why)
		}
	}
	// One sample: no interval; 5: [min, max] at 1 - 2^-4 = 93.75%.
	if c := cell(t, lat, 1024, "mpich"); !math.IsNaN(c.CILow) || !math.IsNaN(c.CIHigh) {
		t.Errorf("one sample has interval [%v, %v]", c.CILow, c.CIHigh)
	}
	if c := cell(t, lat, 1024, "gotune"); c.CILow != 0.80 || c.CIHigh != 0.88 || c.Confidence != 0.9375 {
		t.Errorf("5 samples: [%v, %v] at %v, want [0.80, 0.88] at 0.9375", c.CILow, c.CIHigh, c.Confidence)
	}

	geo := []struct {
		tab   compare.Table
		side  int
		mean  float64
		sizes int
		why   string
	}{
		// Product of the four latency ratios above, to the 1/4.
		{lat, 2, math.Pow(0.27/0.22*0.275/0.276*0.72/0.84*1.28/1.10, 0.25), 4, "≈ 1.0509"},
		{lat, 1, 0.0305925885329116, 11, "sizes 1 to 1K, 1 to 8 dominated by MPICH's slow start"},
		{bw, 2, math.Sqrt(6200 / 5550.655 * 24100 / 24082.155), 2, "≈ 1.0573"},
		{bw, 1, nan, 0, "no size"},
	}
	for _, g := range geo {
		s := g.tab.Sides[g.side]
		if !near(s.Geomean, g.mean) && !(math.Abs(s.Geomean-g.mean) < 1e-12) || s.Sizes != g.sizes {
			t.Errorf("%s %s geomean %v over %d sizes, want %v over %d (%s)", g.tab.Pattern, s.Name, s.Geomean, s.Sizes, g.mean, g.sizes, g.why)
		}
	}
	if !strings.Contains(strings.Join(lat.Notes, "\n"), "openmpi pools 2 results with different labels: osu_latency 7.4; osu_latency 7.0") {
		t.Errorf("latency notes %q do not say the reference pooled two labels", lat.Notes)
	}
}

// TestVerdicts: two sides of five samples each, where the U test can
// decide. The two-sided exact p of U for 5 and 5 samples: 252 = C(10,5)
// orderings, U counts how many (reference, side) pairs have the side's
// value above; P(U = 0) = 1/252, and U's counts for 0..12 are 1, 1, 2,
// 3, 5, 7, 9, 11, 14, 16, 18, 19, 20 (partitions of U into at most 5
// parts of at most 5).
func TestVerdicts(t *testing.T) {
	apart := 2.0 / 252                           // U = 0 or 25: p = 2/252 ≈ 0.0079
	interleaved := 2 * (126.0 - 19 - 20) / 252   // U = 10: 2 P(U ≤ 10) = 174/252 ≈ 0.6905
	seq := func(start, step float64) []float64 { // 5 values, start, start+step, ...
		v := make([]float64, 5)
		for i := range v {
			v[i] = start + float64(i)*step
		}
		return v
	}
	cases := []struct {
		name      string
		unit      string
		ref, side []float64
		ratio     float64
		verdict   compare.Verdict
		p         float64
	}{
		{"latency lower, apart", "us", seq(2.5, 0.01), seq(2.0, 0.01), 2.52 / 2.02, compare.Better, apart},      // medians 2.52, 2.02: 1.2475
		{"latency higher, apart", "us", seq(2.0, 0.01), seq(2.5, 0.01), 2.02 / 2.52, compare.Worse, apart},      // 0.8016
		{"bandwidth higher, apart", "MB/s", seq(1000, 10), seq(1200, 10), 1220.0 / 1020, compare.Better, apart}, // 1.1961
		{"rate lower, apart", "msg/s", seq(1e6, 1e4), seq(8e5, 1e4), 8.2e5 / 1.02e6, compare.Worse, apart},      // 0.8039
		{"apart within 3%", "us", seq(100, 0.2), seq(101, 0.2), 100.4 / 101.4, compare.Same, apart},             // 0.9901: significant, but noise
		{"interleaved, 7% apart", "us", seq(10, 2), seq(11, 2), 14.0 / 15, compare.Unsettled, interleaved},      // 0.9333
		{"interleaved within 3%", "MB/s", seq(100, 2), seq(101, 2), 105.0 / 104, compare.Same, interleaved},     // 1.0096
		{"one sample", "us", seq(2.5, 0.01), []float64{2.0}, 2.52 / 2.0, compare.OneSample, math.NaN()},
		{"two vs two apart", "us", []float64{3, 3.1}, []float64{2, 2.1}, 3.05 / 2.05, compare.Unsettled, 2.0 / 6}, // min p of 2+2 is 2/C(4,2)
		{"all equal", "us", seq(2, 0), seq(2, 0), 1, compare.Same, 1},                                             // the U test refuses: p = 1
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pattern := bench.Pattern("x")
			point := func(v []float64) []bench.Point {
				return []bench.Point{{Size: 64, Unit: c.unit, Samples: v}}
			}
			tables, err := compare.Build([]compare.Side{
				{Name: "ref", Results: []bench.Result{{Label: "r", Spec: bench.Spec{Pattern: pattern}, Points: point(c.ref)}}},
				{Name: "new", Results: []bench.Result{{Label: "n", Spec: bench.Spec{Pattern: pattern}, Points: point(c.side)}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			got := tables[0].Rows[0].Cells[1]
			if !near(got.Ratio, c.ratio) || got.Verdict != c.verdict || !near(got.P, c.p) {
				t.Errorf("ratio %v %q p=%v, want ratio %v %q p=%v", got.Ratio, got.Verdict, got.P, c.ratio, c.verdict, c.p)
			}
			if g := tables[0].Sides[1]; !near(g.Geomean, c.ratio) || g.Sizes != 1 {
				t.Errorf("geomean %v over %d sizes, want the one ratio %v", g.Geomean, g.Sizes, c.ratio)
			}
		})
	}
}

func TestHigherIsBetter(t *testing.T) {
	cases := []struct {
		unit   string
		higher bool
		ok     bool
	}{
		{"us", false, true}, {"µs", false, true}, {"ns", false, true}, {"ms", false, true}, {"s", false, true},
		{"MB/s", true, true}, {"GB/s", true, true}, {"msg/s", true, true},
		{"", false, false}, {"ops", false, false}, {"Gbit/s", false, false},
	}
	for _, c := range cases {
		higher, err := compare.HigherIsBetter(c.unit)
		if higher != c.higher || (err == nil) != c.ok {
			t.Errorf("HigherIsBetter(%q) = %v, %v; want %v, ok %v", c.unit, higher, err, c.higher, c.ok)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	res := func(pattern bench.Pattern, unit string) []bench.Result {
		return []bench.Result{{Label: "l", Spec: bench.Spec{Pattern: pattern}, Points: []bench.Point{{Size: 8, Unit: unit, Samples: []float64{1, 2}}}}}
	}
	lat := res(bench.Latency, "us")
	cases := []struct {
		name  string
		sides []compare.Side
		want  string
	}{
		{"one side", []compare.Side{{"a", lat}}, "need at least two sides, have 1"},
		{"same names", []compare.Side{{"a", lat}, {"a", lat}}, `two sides are named "a"`},
		{"no name", []compare.Side{{"a", lat}, {"", lat}}, "side 2 has no name"},
		{"empty side", []compare.Side{{"a", lat}, {"b", nil}}, `side "b" holds no samples`},
		{"nothing shared", []compare.Side{{"a", lat}, {"b", res(bench.Bandwidth, "MB/s")}}, `no other side measures a pattern and unit of the reference "a"`},
		{"unknown unit", []compare.Side{{"a", res("allreduce", "Gbit/s")}, {"b", res("allreduce", "Gbit/s")}}, `allreduce (Gbit/s): unknown unit "Gbit/s"`},
		{"no unit", []compare.Side{{"a", lat}, {"b", res("allreduce", "")}}, `side "b", result "l", size 8: the point has no unit`},
		{"not a number", []compare.Side{{"a", lat}, {"b", []bench.Result{{Label: "l", Points: []bench.Point{{Size: 8, Unit: "us", Samples: []float64{math.Inf(1)}}}}}}}, "sample +Inf is not a number"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := compare.Build(c.sides)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// A gotune point without a unit (an older file) takes its pattern's; a
// result's sizes missing from the reference make no row.
func TestPatternUnitAndSizes(t *testing.T) {
	ref := []bench.Result{{Label: "a", Spec: bench.Spec{Pattern: bench.MsgRate}, Points: []bench.Point{{Size: 8, Samples: []float64{100}}}}}
	other := []bench.Result{{Label: "b", Spec: bench.Spec{Pattern: bench.MsgRate}, Points: []bench.Point{
		{Size: 8, Unit: "msg/s", Samples: []float64{150}}, {Size: 16, Unit: "msg/s", Samples: []float64{1}}}}}
	tables, err := compare.Build([]compare.Side{{"a", ref}, {"b", other}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 1 || tables[0].Unit != "msg/s" || len(tables[0].Rows) != 1 || tables[0].Rows[0].Cells[1].Ratio != 1.5 {
		t.Errorf("tables %+v, want one msg/s row at 8 with ratio 1.5", tables)
	}
}

// Results of one pattern but different metrics (nccl-tests' algbw and
// busbw) are compared apart, never pooled.
func TestMetricsStayApart(t *testing.T) {
	res := func(metric string, v float64) bench.Result {
		return bench.Result{Label: "nccl " + metric, Metric: metric, Spec: bench.Spec{Pattern: "all_reduce"},
			Points: []bench.Point{{Size: 1 << 20, Unit: "MB/s", Samples: []float64{v}}}}
	}
	tables, err := compare.Build([]compare.Side{
		{Name: "a", Results: []bench.Result{res("algbw", 100), res("busbw", 175)}},
		{Name: "b", Results: []bench.Result{res("algbw", 200), res("busbw", 350)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 2 {
		t.Fatalf("%d tables, want one per metric", len(tables))
	}
	for _, tb := range tables {
		if c := tb.Rows[0].Cells[1]; c.N != 1 || c.Ratio != 2 {
			t.Errorf("%s: cell %+v, want one sample at ratio 2", tb.Measure(), c)
		}
	}
}

// A gotune collective (its Metric names nccl-tests' out-of-place time)
// shares its table with an imported nccl-tests run of the collective:
// sizes both measured are compared, in µs.
func TestCollectiveBesideNCCLTests(t *testing.T) {
	nt := load(t, "nccl-tests", "../importer/testdata/nccl-tests/real_all_gather_h200x2.txt")
	v := 20.0
	ours := compare.Side{Name: "gotune", Results: []bench.Result{{Label: "gotune nccl", Metric: "float/none out-of-place time",
		Spec:   bench.Spec{Transport: "nccl", Pattern: bench.AllGather, Ranks: 2, Sizes: []int{8192}},
		Points: []bench.Point{{Size: 8192, Unit: "us", Samples: []float64{v, v, v}, Median: v}}}}}
	tables, err := compare.Build([]compare.Side{nt, ours})
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Measure() != "all_gather float/none out-of-place time" {
			continue
		}
		for _, row := range tb.Rows {
			if row.Size == 8192 && row.Cells[1].N == 3 {
				return
			}
		}
		t.Fatalf("the out-of-place time table has no 8 KiB row with gotune's 3 samples: %+v", tb.Rows)
	}
	t.Fatalf("no table for all_gather's out-of-place time among %d", len(tables))
}
