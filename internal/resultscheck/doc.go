// Package resultscheck holds the test that keeps results/ data of record
// only: no scripts, sources or diffs (tools live under tools/, scratch
// stays out of the tree), nothing gotune regenerates (a run's
// measurements.bench: gotune tune --bench), and run stores compressed
// (measurements.jsonl.gz). It walks the files under results/ at the
// module root, so it checks a fresh clone as CI sees it, and a working
// tree before its results are checked in.
package resultscheck
