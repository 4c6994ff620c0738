// Package search holds the tuner's statistics: whether two candidates'
// samples at one message size separate (a Mann-Whitney U test through
// golang.org/x/perf/benchmath) or are equal within noise, and where to
// measure next (bisection between ladder sizes whose winners differ).
// It measures nothing itself.
package search
