// Package resultscheck holds the test that keeps results/ data of record
// only: no scripts, sources or diffs (tools live under tools/, scratch
// stays out of the tree), nothing gotune regenerates (a run's
// measurements.bench: gotune tune --bench), and run stores compressed
// (measurements.jsonl.gz). It checks the files git tracks under results/
// (a fresh clone, as CI sees it, has no others), or every file there
// outside a git work tree.
package resultscheck
