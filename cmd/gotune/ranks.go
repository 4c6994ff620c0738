package main

import (
	"fmt"
	"strconv"

	"github.com/gotune/gotune/bench"
)

// parseRanks reads --ranks: a number of at least 2, or node (one rank per
// core of the cpuset; bench.NodeRanks).
func parseRanks(s string, p bench.Pattern) (int, error) {
	if s == "node" {
		n, err := bench.NodeRanks(p)
		if err != nil {
			return 0, fmt.Errorf("--ranks node: %w", err)
		}
		return n, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 2 {
		return 0, fmt.Errorf("--ranks %q: want a number of ranks, at least 2, or node", s)
	}
	return n, nil
}

// multiRankCPUs settles a multi-rank pattern's CPUs: --cpus auto places
// its ranks one per core, pairs across the cpuset's halves
// (bench.PlaceRanks); a list needs a CPU for each rank.
func multiRankCPUs(flag string, listed []int, ranks int) ([]int, error) {
	switch {
	case flag == "auto":
		return bench.PlaceRanks(ranks), nil
	case len(listed) > 0 && len(listed) < ranks:
		return nil, fmt.Errorf("--cpus %q: need a CPU for each of the %d ranks (--ranks)", flag, ranks)
	}
	return listed, nil
}
