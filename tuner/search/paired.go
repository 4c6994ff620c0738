package search

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/aclements/go-moremath/stats"
)

// LookAlpha is the two-sided error of one look at a paired comparison. The
// tuner looks again after every round it adds, and naive peeking at 0.05
// doubles the overall error; 0.02 per look keeps it near 5% over the few
// looks a sweep takes (../shared/research/tuner-decisions.md §2.2).
const LookAlpha = 0.02

// LeanBelief is the posterior probability that a challenger leads by more
// than Noise that a last look needs to depart from the incumbent without a
// settled test: when the rounds run out, a departure must be worth making
// as well as likely right, or sweeps of one node would flip on noise.
const LeanBelief = 0.9

// maxPriorDF caps the weight of a stage's pooled noise against one
// comparison's own: a comparison whose rounds scatter far more than the
// others' (a size on a cache edge) must still widen its own interval.
const maxPriorDF = 10

// Prior is the noise the comparisons of one stage share: the variance of
// one round's log-ratio, pooled over every comparison of the stage, and the
// degrees of freedom it counts as. Noise belongs to the machine more than
// to the candidates, so pooling lets three rounds settle a large gap that
// three rounds alone could not (a U test on 3 a side never reaches 0.05).
type Prior struct {
	Var float64
	DF  float64
}

// PoolPrior pools the per-round log-ratios of several comparisons (each
// set one comparison's rounds) into a Prior: the sum of squares about each
// set's own mean over the sum of their degrees of freedom, counted as at
// most maxPriorDF.
func PoolPrior(sets [][]float64) Prior {
	ss, df := 0.0, 0
	for _, d := range sets {
		d, _ = trimmed(d)
		if len(d) < 2 {
			continue
		}
		m := mean(d)
		for _, x := range d {
			ss += (x - m) * (x - m)
		}
		df += len(d) - 1
	}
	if df == 0 {
		return Prior{}
	}
	return Prior{Var: ss / float64(df), DF: math.Min(float64(df), maxPriorDF)}
}

// SizedRounds are one comparison's per-round log-ratios (LogRatios) at one
// message size.
type SizedRounds struct {
	Size int
	D    []float64
}

// priorOctaves is how far in message size, in powers of two either way,
// the comparisons a Priors pools for one size may lie. Noise is a
// property of the machine at a size: on the GPU hosts' CPUs one process
// pair's small-message bandwidth scatters ±25-35% from the next one's and
// its multi-MiB bandwidth ±2-5%, so one pool over a stage's sizes would
// hide a settled gap at one end behind the noise of the other.
const priorOctaves = 2

// Priors is the noise of a stage's comparisons, pooled by message size.
type Priors []SizedRounds

// At is the Prior of a comparison at size n: PoolPrior over the stage's
// comparisons within priorOctaves of n.
func (p Priors) At(n int) Prior {
	var sets [][]float64
	for _, s := range p {
		if math.Abs(octave(s.Size)-octave(n)) <= priorOctaves {
			sets = append(sets, s.D)
		}
	}
	return PoolPrior(sets)
}

// octave is log2 of a message size, sizes below one byte taken as one.
func octave(n int) float64 { return math.Log2(float64(max(n, 1))) }

// LogRatios are log(b/a) per index of two series measured side by side
// (a[i] and b[i] in the same round), oriented so that a positive value
// means b is better; pairs with a non-positive value are skipped.
func LogRatios(a, b []float64, higherBetter bool) []float64 {
	var d []float64
	for i := range min(len(a), len(b)) {
		if a[i] <= 0 || b[i] <= 0 {
			continue
		}
		x := math.Log(b[i] / a[i])
		if !higherBetter {
			x = -x
		}
		d = append(d, x)
	}
	return d
}

// Paired decides between A and B from d, one log-ratio per round (positive:
// B better; LogRatios), with the stage's prior. Rounds far off the others
// are left out first (trimmed). The round's variance is
// the comparison's own shrunk toward the prior's (empirical Bayes, as
// limma moderates few replicates), and a t interval at LookAlpha on the
// mean log-ratio decides in three ways around the indifference zone of
// Noise:
//   - B (or A) wins when the interval excludes 0 and the mean gain exceeds
//     Noise: a real difference that matters;
//   - a tie when the whole interval lies within ±Noise: equal, settled;
//   - otherwise unsettled: measure more rounds, or Lean at the last look.
//
// Gain, Lo and Hi are relative (0.1: B 10% better).
func Paired(d []float64, prior Prior) Comparison {
	d, dropped := trimmed(d)
	n := len(d)
	c := Comparison{Outcome: Unsettled, P: 1, Rounds: n, Outliers: dropped, Paired: true, Lo: math.Inf(-1), Hi: math.Inf(1), PBetter: 0.5}
	if n == 0 {
		return c
	}
	m := mean(d)
	c.Gain = math.Expm1(m)
	v, df := prior.Var*prior.DF, prior.DF
	if n > 1 {
		for _, x := range d {
			v += (x - m) * (x - m)
		}
		df += float64(n - 1)
	}
	if df == 0 { // one round and nothing pooled: no idea of the noise
		return c
	}
	se := math.Sqrt(v / df / float64(n))
	c.mean, c.se, c.df = m, se, df
	zone := math.Log1p(Noise)
	if se == 0 {
		c.Lo, c.Hi = c.Gain, c.Gain
		c.P, c.PBetter = 1, 0.5
		if m != 0 {
			c.P = 0
			c.PBetter = map[bool]float64{true: 1, false: 0}[m > 0]
		}
	} else {
		dist := stats.TDist{V: df}
		half := stats.InvCDF(dist)(1-LookAlpha/2) * se
		c.Lo, c.Hi = math.Expm1(m-half), math.Expm1(m+half)
		c.PBetter = dist.CDF(m / se)
		c.P = 2 * math.Min(c.PBetter, 1-c.PBetter)
	}
	lo, hi := math.Log1p(c.Lo), math.Log1p(c.Hi)
	switch {
	case lo > 0 && m > zone:
		c.Outcome = BWins
	case hi < 0 && m < -zone:
		c.Outcome = AWins
	case lo > -zone && hi < zone:
		c.Outcome = Tie
	}
	return c
}

// Lean is the decision of a last look: a settled outcome as it is; an
// unsettled one goes to the side believed, at LeanBelief, to lead by more
// than Noise; else it stays unsettled (the incumbent keeps it, and the
// caller says so).
func (c Comparison) Lean() Outcome {
	if c.Outcome != Unsettled || c.se == 0 || c.df == 0 {
		return c.Outcome
	}
	zone := math.Log1p(Noise)
	dist := stats.TDist{V: c.df}
	switch {
	case dist.CDF((c.mean-zone)/c.se) >= LeanBelief:
		return BWins
	case dist.CDF((-c.mean-zone)/c.se) >= LeanBelief:
		return AWins
	}
	return Unsettled
}

// ExpectedLoss is what choosing one side gives up, in expectation over
// what the rounds say of the gain (the t posterior Paired puts on the mean
// log-ratio): choosing A (chooseB false) gives up the gain where B is
// better, choosing B the loss where A is. In log-ratio units (0.1: about
// 10% of the metric). It is the stake of stopping now: a settled
// comparison's is near 0 on its winning side, an unsettled 40% gap kept by
// the incumbent costs about 40%, an unsettled 2% gap at most a few per
// cent. +Inf where the rounds give no estimate of the noise (or are not
// paired): nothing says how much is at stake.
func (c Comparison) ExpectedLoss(chooseB bool) float64 {
	a := c.mean // loss = (a + se·T)⁺, T ~ t(df)
	if chooseB {
		a = -a
	}
	switch {
	case !c.Paired || c.df == 0 || c.Rounds == 0:
		return math.Inf(1)
	case c.se == 0:
		return math.Max(a, 0)
	case c.df <= 1: // a t with one degree of freedom has no mean
		return math.Inf(1)
	}
	dist := stats.TDist{V: c.df}
	z := a / c.se
	return a*dist.CDF(z) + c.se*(c.df+z*z)/(c.df-1)*dist.PDF(z)
}

func (c Comparison) pairedString() string {
	if math.IsInf(c.Lo, 0) {
		return fmt.Sprintf("%s (B %+.1f%%, %d round(s): no estimate of the noise)", c.Outcome, 100*c.Gain, c.Rounds)
	}
	out := ""
	if c.Outliers > 0 {
		out = fmt.Sprintf(" (%d far off, left out)", c.Outliers)
	}
	return fmt.Sprintf("%s (B %+.1f%% [%+.1f, %+.1f], %d rounds%s, P(B better) %.2f)", c.Outcome, 100*c.Gain, 100*c.Lo, 100*c.Hi, c.Rounds, out, c.PBetter)
}

// trimmed leaves out of d, from 4 rounds on, the rounds more than
// outlierScale robust deviations (1.4826 MAD, at least minScale) from the
// median, at most a quarter of them, most distant first: a slow spell of
// the machine that begins mid-round slows one side of that round alone,
// and one such round would move a mean of three or four.
func trimmed(d []float64) (kept []float64, dropped int) {
	n := len(d)
	if n < 4 {
		return d, 0
	}
	med := Median(d)
	dev := make([]float64, n)
	for i, x := range d {
		dev[i] = math.Abs(x - med)
	}
	scale := math.Max(1.4826*Median(dev), minScale)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(dev[b], dev[a]) })
	out := make([]bool, n)
	for _, i := range order[:n/4] {
		if dev[i] > outlierScale*scale {
			out[i] = true
			dropped++
		}
	}
	for i, x := range d {
		if !out[i] {
			kept = append(kept, x)
		}
	}
	return kept, dropped
}

// outlierScale and minScale bound what trimmed takes for an outlier: 5
// robust deviations, and a deviation of no less than 0.5% (rounds that
// agree to the last digit have none).
const (
	outlierScale = 5
	minScale     = 0.005
)

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
