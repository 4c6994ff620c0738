package bench

import (
	"math"
	"slices"
	"testing"
)

func TestSummarizeIntervals(t *testing.T) {
	cases := []struct {
		samples          []float64
		lo, hi, conf     float64
		wantMedian       float64
		wantFiniteBounds bool
	}{
		{samples: []float64{3}, lo: 3, hi: 3, conf: 0, wantMedian: 3},
		{samples: []float64{4, 2}, lo: 2, hi: 4, conf: 0.5, wantMedian: 3},
		{samples: []float64{5, 1, 3, 2, 4}, lo: 1, hi: 5, conf: 0.9375, wantMedian: 3},
	}
	for _, c := range cases {
		p := Summarize(8, "us", c.samples, nil)
		if p.Median != c.wantMedian || p.CILow != c.lo || p.CIHigh != c.hi || math.Abs(p.Confidence-c.conf) > 1e-12 {
			t.Errorf("%v: median %v CI [%v, %v] at %v; want %v [%v, %v] at %v", c.samples, p.Median, p.CILow, p.CIHigh, p.Confidence, c.wantMedian, c.lo, c.hi, c.conf)
		}
	}
	// The samples keep the order in which they were measured.
	order := []float64{3, 1, 2}
	if p := Summarize(8, "us", order, nil); !slices.Equal(p.Samples, []float64{3, 1, 2}) {
		t.Errorf("samples reordered: %v", p.Samples)
	}
	// Percentiles name the slow tail: high for latency, low for rates.
	var iters []float64
	for v := 1; v <= 100; v++ {
		iters = append(iters, float64(v))
	}
	lat, rate := Summarize(8, "us", many(), iters), Summarize(8, "MB/s", many(), iters)
	if !(lat.P99 > lat.P90 && lat.P90 > lat.P50) || !(rate.P99 < rate.P90 && rate.P90 < rate.P50) {
		t.Errorf("latency p50/p90/p99 %v/%v/%v; rate %v/%v/%v", lat.P50, lat.P90, lat.P99, rate.P50, rate.P90, rate.P99)
	}
	// Enough samples: benchmath's 95% interval, strictly inside [min, max].
	p := Summarize(8, "us", many(), nil)
	if p.Confidence != Confidence || !(p.CILow > 10 && p.CIHigh < 21 && p.CILow <= p.Median && p.Median <= p.CIHigh) {
		t.Errorf("12 samples: %+v", p)
	}
}

func many() []float64 { return []float64{10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21} }
