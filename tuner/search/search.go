package search

import (
	"fmt"
	"math"
	"slices"

	"golang.org/x/perf/benchmath"
)

// Noise is the relative difference of medians below which two candidates
// count as equal, whatever the test says: 3%, the tolerance the tuner uses
// for "the smallest within 3% of the best".
const Noise = 0.03

// Outcome says which candidate is better at one size.
type Outcome int

const (
	Unsettled Outcome = iota // not enough evidence either way: measure more
	Tie                      // equal within noise
	AWins
	BWins
)

func (o Outcome) String() string {
	return [...]string{"unsettled", "tie", "A", "B"}[o]
}

// Comparison is the verdict on two samples.
type Comparison struct {
	Outcome Outcome
	P       float64 // Mann-Whitney U test p-value, or the paired t test's
	// Gain is how much better B's median is than A's (0.1: 10% better;
	// negative: worse), in the metric's own direction; for a paired
	// comparison, the geometric mean of B's per-round ratios, less one.
	Gain float64
	// Paired comparisons only (Paired): the interval of Gain at LookAlpha,
	// the rounds it rests on, and the posterior belief that B is better.
	Paired   bool
	Lo, Hi   float64
	Rounds   int // rounds the decision rests on
	Outliers int // rounds left out as far off the others
	PBetter  float64
	// the mean log-ratio, its standard error and degrees of freedom, for
	// Lean
	mean, se, df float64
}

func (c Comparison) String() string {
	if c.Paired {
		return c.pairedString()
	}
	return fmt.Sprintf("%s (p=%.3f, B %+.1f%%)", c.Outcome, c.P, 100*c.Gain)
}

// Compare decides between samples a and b of one metric; higherBetter says
// its direction (bandwidth, rates: true; latency: false). Candidates
// separate when the U test rejects equality at alpha 0.05 and the medians
// differ by more than Noise; they are equal within noise when the medians
// are within Noise (significant or not: a real 1% difference does not
// decide a transport); otherwise the comparison is unsettled: measure more.
// Each value should be one independent measurement (a trial's median, not
// its repetitions, which share processes and buffers).
func Compare(a, b []float64, higherBetter bool) Comparison {
	if len(a) == 0 || len(b) == 0 {
		return Comparison{Outcome: Unsettled, P: 1}
	}
	sa := benchmath.NewSample(slices.Clone(a), &benchmath.DefaultThresholds)
	sb := benchmath.NewSample(slices.Clone(b), &benchmath.DefaultThresholds)
	ma, mb := median(sa.Values), median(sb.Values)
	gain := 0.0
	if ma != 0 {
		gain = mb/ma - 1
		if !higherBetter && mb != 0 {
			gain = ma/mb - 1
		}
	}
	cmp := benchmath.AssumeNothing.Compare(sa, sb)
	c := Comparison{P: cmp.P, Gain: gain}
	switch {
	case math.Abs(gain) <= Noise:
		c.Outcome = Tie
	case cmp.P < cmp.Alpha && gain > 0:
		c.Outcome = BWins
	case cmp.P < cmp.Alpha:
		c.Outcome = AWins
	default: // the medians differ by more than noise, the test cannot tell
		c.Outcome = Unsettled
	}
	return c
}

// median of sorted values.
func median(v []float64) float64 {
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// Median of unsorted values (0 for none).
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return median(s)
}

// Bisect returns the sizes to measure next: for every two neighbouring
// measured sizes (ascending) whose winners differ and that are more than a
// factor 2 apart, the power of two between them nearest their geometric
// mean. A crossover is then known to within one doubling.
func Bisect(sizes []int, winner func(size int) string) []int {
	var next []int
	for i := 1; i < len(sizes); i++ {
		lo, hi := sizes[i-1], sizes[i]
		if lo <= 0 || hi <= 2*lo || winner(lo) == winner(hi) {
			continue
		}
		mid := 1 << int(math.Round((math.Log2(float64(lo))+math.Log2(float64(hi)))/2))
		if mid > lo && mid < hi {
			next = append(next, mid)
		}
	}
	return next
}
