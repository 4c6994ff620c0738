package bench

import (
	"slices"
	"testing"
)

// Over one cycle of rows every configuration runs once per round and
// follows every other one equally often; the first round keeps the given
// order.
func TestInterleaveOrderBalancesPredecessors(t *testing.T) {
	for n := 1; n <= 7; n++ {
		rows := n
		if n%2 == 1 && n > 1 {
			rows = 2 * n
		}
		if got := InterleaveOrder(n, 1); !slices.Equal(got, identity(n)) {
			t.Errorf("n=%d: round 1 runs %v, want the given order", n, got)
		}
		follows := map[[2]int]int{}
		for round := 1; round <= rows; round++ {
			row := InterleaveOrder(n, round)
			if sorted := slices.Sorted(slices.Values(row)); !slices.Equal(sorted, identity(n)) {
				t.Fatalf("n=%d round %d: %v is not a permutation", n, round, row)
			}
			for i := 1; i < n; i++ {
				follows[[2]int{row[i-1], row[i]}]++
			}
		}
		want := 0
		if n > 1 {
			want = rows * (n - 1) / (n * (n - 1))
		}
		for a := range n {
			for b := range n {
				if a != b && follows[[2]int{a, b}] != want {
					t.Errorf("n=%d: %d directly follows %d in %d rounds of %d, want %d", n, b, a, follows[[2]int{a, b}], rows, want)
				}
			}
		}
		if n > 1 && !slices.Equal(InterleaveOrder(n, rows+1), InterleaveOrder(n, 1)) {
			t.Errorf("n=%d: the rows do not repeat after %d rounds", n, rows)
		}
	}
}

func identity(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
