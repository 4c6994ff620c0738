package bench

import (
	"math"
	"slices"

	"github.com/montanaflynn/stats"
	"golang.org/x/perf/benchmath"
)

// Confidence is the level of the reported interval around the median.
const Confidence = 0.95

// Summarize builds a point from per-repetition values (samples) and
// per-iteration values (perIter, may be nil: percentiles then come from the
// samples), all in unit. Unit "us" is lower-is-better; every other unit is
// a rate, higher-is-better.
func Summarize(size int, unit string, samples, perIter []float64) Point {
	p := Point{Size: size, Unit: unit, Samples: samples, Confidence: Confidence}
	if len(samples) == 0 {
		return p
	}
	// NewSample sorts its argument: keep the samples in the order measured.
	sorted := slices.Clone(samples)
	s := benchmath.AssumeNothing.Summary(benchmath.NewSample(sorted, &benchmath.DefaultThresholds), Confidence)
	p.Median, p.CILow, p.CIHigh = s.Center, s.Lo, s.Hi
	for _, w := range s.Warnings {
		p.Warnings = append(p.Warnings, w.Error())
	}
	if math.IsInf(p.CILow, 0) || math.IsInf(p.CIHigh, 0) {
		// Too few samples for the requested level: the widest
		// distribution-free interval, [min, max], covers the median with
		// probability 1 - 2^(1-n). Report that, with its true level.
		p.CILow, p.CIHigh = slices.Min(samples), slices.Max(samples)
		p.Confidence = 1 - math.Pow(2, float64(1-len(samples)))
	}
	dist := perIter
	if len(dist) == 0 {
		dist = samples
	}
	// pN is the value N% of iterations did at least as well as: the slow
	// tail. For rates (MB/s, msg/s) that is the low end.
	tail := func(q float64) float64 {
		if unit != "us" {
			q = 100 - q
		}
		v, _ := stats.Percentile(dist, q)
		return v
	}
	p.P50, p.P90, p.P99 = tail(50), tail(90), tail(99)
	return p
}
