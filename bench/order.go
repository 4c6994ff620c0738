package bench

import "slices"

// InterleaveOrder is the order in which n configurations run in round
// (1-based) of an interleaved comparison: the rows of a Williams design,
// one per round in turn. Over a full cycle of rows (n of them for even n,
// 2n for odd n) every configuration runs once per round and directly
// follows every other one equally often, so a carryover from one trial to
// the next (a run that leaves the kernel freeing or compacting memory, say)
// falls on every configuration alike. Plain rotation does not: rotated,
// a configuration always follows the same neighbour, and such a carry-over
// was measured (docs/tuner.md, Interleaved rounds).
func InterleaveOrder(n, round int) []int {
	if n <= 0 {
		return nil
	}
	first := make([]int, n) // 0, 1, n-1, 2, n-2, ...
	lo, hi := 1, n-1
	for i := 1; i < n; i++ {
		if i%2 == 1 {
			first[i], lo = lo, lo+1
		} else {
			first[i], hi = hi, hi-1
		}
	}
	rows := n
	if n%2 == 1 {
		rows = 2 * n
	}
	r := (round - 1) % rows
	if r < 0 {
		r += rows
	}
	row := make([]int, n)
	for i := range row {
		row[i] = (first[i] + r%n) % n
	}
	if r >= n { // odd n: the second n rows mirror the first
		slices.Reverse(row)
	}
	// Relabel so that the first row is the given order: renaming the
	// configurations keeps the balance.
	label := make([]int, n)
	for i, c := range first {
		label[c] = i
	}
	for i, c := range row {
		row[i] = label[c]
	}
	return row
}
