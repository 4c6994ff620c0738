// Package compare puts results of different stacks, versions, machines or
// tools side by side, size by size: per side the median and its confidence
// interval, and per side against the first (the reference) the ratio of
// medians and a Mann-Whitney U test verdict.
//
// A Side is a name and every result it holds: several results of one
// (pattern, unit) are repeated runs of the same thing, and their samples
// of one size are pooled. Build makes a Table per (pattern, unit) of the
// reference that another side also has; Write renders tables as a text
// table, GitHub markdown, CSV or the Go benchmark format (for benchstat).
//
// The direction of a metric comes from its unit (HigherIsBetter), not from
// bench.Pattern: imported results carry patterns gotune does not know
// ("allreduce", nccl-tests' "all_reduce" in µs).
//
// The verdict follows the tuner's rule (tuner/search.Compare, which bench
// may not import): better or worse when the U test rejects equality at
// Alpha and the medians differ by more than Noise, same within Noise,
// unsettled otherwise, and no test at all with fewer than two samples on
// either side.
package compare
