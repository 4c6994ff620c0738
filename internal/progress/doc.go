// Package progress shows how far a long command has got: on a terminal a
// live bar per stage (github.com/vbauerster/mpb) with the units done of
// those planned (trials by default; runs, sizes, probes: Unit), the time
// elapsed and what is left of the budget; when the output is not a
// terminal (CI, a file) plain lines, at each stage's start and then at
// most one per Interval. It knows nothing of what it counts: the sweep
// (tuner/sweep.Meter), anchors and stacks (bench/mpistack.Meter), bench
// (bench.Meter) and probe tell it.
package progress
