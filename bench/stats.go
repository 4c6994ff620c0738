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
// samples), all in unit.
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
	p.P50, _ = stats.Percentile(dist, 50)
	p.P90, _ = stats.Percentile(dist, 90)
	p.P99, _ = stats.Percentile(dist, 99)
	return p
}
