// Package search holds the tuner's statistics: whether two candidates
// measured side by side in interleaved rounds differ at one message size
// (a paired test on per-round log-ratios, its variance pooled over the
// stage's comparisons, decided around an indifference zone), or, for
// samples without rounds, a Mann-Whitney U test through
// golang.org/x/perf/benchmath; and where to measure next (bisection
// between ladder sizes whose winners differ). It measures nothing itself.
package search
