package search

import (
	"math"
	"math/rand/v2"
	"testing"
)

// roundsOf draws n per-round log-ratios: a true gain, a per-round drift
// that both sides share (it cancels in the ratio) and each side's own
// noise sd (so the ratio's sd is sd·√2).
func roundsOf(rng *rand.Rand, n int, gain, sd float64) []float64 {
	d := make([]float64, n)
	for i := range d {
		drift := rng.NormFloat64() * 0.2 // a slow spell: 20%, both sides
		a := math.Exp(drift + rng.NormFloat64()*sd)
		b := math.Exp(drift+rng.NormFloat64()*sd) * (1 + gain)
		d[i] = math.Log(b / a)
	}
	return d
}

func TestPaired(t *testing.T) {
	quiet := Prior{Var: 0.05 * 0.05, DF: 10}
	for _, tc := range []struct {
		name  string
		d     []float64
		prior Prior
		want  Outcome
	}{
		// The failure seen on the VM and the GPU host's CPUs: cma 50% ahead
		// in each of 3 rounds. A U test on 3 a side can never settle it.
		{"large consistent gap, 3 rounds, pooled noise", []float64{math.Log(1.45), math.Log(1.55), math.Log(1.5)}, quiet, BWins},
		{"large consistent gap, 3 rounds, nothing pooled", []float64{math.Log(1.45), math.Log(1.55), math.Log(1.5)}, Prior{}, BWins},
		{"large consistent loss", []float64{math.Log(0.6), math.Log(0.62), math.Log(0.58)}, quiet, AWins},
		{"equal within the zone, tight", []float64{0.004, -0.003, 0.001, 0.002}, Prior{Var: 0.005 * 0.005, DF: 10}, Tie},
		{"no gap, noisy: not settled either way", []float64{0.06, -0.05, 0.02}, quiet, Unsettled},
		{"significant but below the zone is no win", []float64{0.02, 0.021, 0.019, 0.02}, Prior{Var: 0.001 * 0.001, DF: 10}, Tie},
		{"one round and nothing pooled", []float64{math.Log(2)}, Prior{}, Unsettled},
		{"one round with a pooled prior", []float64{math.Log(2)}, quiet, BWins},
		{"no rounds", nil, quiet, Unsettled},
		{"one round of five slowed on one side by a spell", []float64{-0.1, -0.11, 0.6, -0.1, -0.09}, quiet, AWins},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c := Paired(tc.d, tc.prior); c.Outcome != tc.want {
				t.Fatalf("Paired = %v, want %v", c, tc.want)
			}
		})
	}
}

// Decisions on many simulated comparisons: a real 20% gap settles in 3
// rounds almost always, and no gap almost never decides a winner (the
// per-look error is LookAlpha, and a win needs the zone's gain too).
func TestPairedErrorRates(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const trials, sd = 4000, 0.035 // ratio sd 5%, as the VM's quiet phases
	stagePrior := func(gain float64) Prior {
		var sets [][]float64
		for range 5 {
			sets = append(sets, roundsOf(rng, 3, gain, sd))
		}
		return PoolPrior(sets)
	}
	wins, falseWins, lean := 0, 0, 0
	for range trials {
		if Paired(roundsOf(rng, 3, 0.2, sd), stagePrior(0.2)).Outcome == BWins {
			wins++
		}
		c := Paired(roundsOf(rng, 3, 0, sd), stagePrior(0))
		if c.Outcome == BWins || c.Outcome == AWins {
			falseWins++
		}
		if l := c.Lean(); l == BWins || l == AWins {
			lean++
		}
	}
	if rate := float64(wins) / trials; rate < 0.95 {
		t.Errorf("a 20%% gap settled in %.1f%% of 3-round comparisons, want >= 95%%", 100*rate)
	}
	if rate := float64(falseWins) / trials; rate > LookAlpha {
		t.Errorf("no gap decided a winner in %.2f%% of comparisons, want <= %.0f%%", 100*rate, 100*LookAlpha)
	}
	if rate := float64(lean) / trials; rate > 0.1 {
		t.Errorf("no gap leaned to a side in %.1f%% of last looks, want <= 10%%", 100*rate)
	}
}

func TestPoolPrior(t *testing.T) {
	p := PoolPrior([][]float64{{1, 3}, {2, 4, 6}, {7}})
	// sums of squares 2 and 8 over 1+2 degrees of freedom.
	if math.Abs(p.Var-10.0/3) > 1e-12 || p.DF != 3 {
		t.Fatalf("PoolPrior = %+v, want Var 10/3, DF 3", p)
	}
	many := make([][]float64, 30)
	for i := range many {
		many[i] = []float64{0, 1}
	}
	if p := PoolPrior(many); p.DF != maxPriorDF {
		t.Fatalf("DF %v, want the cap %d", p.DF, maxPriorDF)
	}
	if p := PoolPrior(nil); p != (Prior{}) {
		t.Fatalf("PoolPrior(nil) = %+v", p)
	}
}

func TestLogRatios(t *testing.T) {
	d := LogRatios([]float64{100, 0, 50}, []float64{200, 10, 25}, true)
	if len(d) != 2 || math.Abs(d[0]-math.Log(2)) > 1e-12 || math.Abs(d[1]+math.Log(2)) > 1e-12 {
		t.Fatalf("bandwidth: %v", d)
	}
	if d := LogRatios([]float64{2}, []float64{1}, false); math.Abs(d[0]-math.Log(2)) > 1e-12 {
		t.Fatalf("latency halved is a gain: %v", d)
	}
}
