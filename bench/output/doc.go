// Package output renders benchmark results for people and for tools.
//
// It owns the output formats: a human table, JSON lines (a run record then
// one record per point), CSV (one row per point), OSU Micro-Benchmarks'
// column layout (so existing OSU scripts can diff and plot gotune's numbers
// next to OSU's) and the Go benchmark format, with one line per repetition,
// for benchstat. Measuring and summarizing belong to package bench; this
// package only formats what a bench.Result already holds.
package output
