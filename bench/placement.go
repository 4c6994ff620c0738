package bench

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gotune/gotune/internal/sys"
)

// Placement of a multi-rank pattern's ranks: one rank per core, the cores
// being the first hardware thread of each core in this process's CPUs (its
// cpuset under a launcher, as DefaultCPUs), in CPU-number order. N ranks
// spread evenly over the C cores, rank r on core r*C/N: the first half of
// the ranks sits on the first half of the cores, so the pairs of mbw_mr and
// multi_lat (rank i with rank i+N/2) each span the two halves of the
// cpuset, which on a two-socket node are its sockets. With N equal to C
// (--ranks node) that is OSU's default mapping under mpirun (rank r on
// core r); with fewer ranks OSU would pack them on the first cores, where
// gotune keeps every pair across the halves. With more ranks than cores
// (a small CI machine) ranks share cores, neighbours in rank order
// together.

// PlaceRanks returns the CPU of each of n ranks, or nil (no pinning) when
// the CPUs cannot be read.
func PlaceRanks(n int) []int {
	return spread(placementCores(n), n)
}

// spread puts rank r of n on cores[r*len(cores)/n] (nil without cores).
func spread(cores []int, n int) []int {
	if len(cores) == 0 || n < 1 {
		return nil
	}
	cpus := make([]int, n)
	for r := range n {
		cpus[r] = cores[r*len(cores)/n]
	}
	return cpus
}

// NodeRanks is the number of ranks of --ranks node: one per core, less
// one where the pattern pairs ranks and the cores are odd.
func NodeRanks(p Pattern) (int, error) {
	cores := placementCores(0)
	if len(cores) == 0 {
		return 0, fmt.Errorf("no CPUs to count: give --ranks a number")
	}
	n := len(cores)
	if p.paired() && n%2 != 0 {
		n--
	}
	return max(n, 2), nil
}

// placementCores lists one CPU per core of this process's CPUs, or of its
// cpuset when a launcher's binding leaves fewer cores than n ranks (n 0:
// whenever a launcher started it).
func placementCores(n int) []int {
	cpus, err := sys.AllowedCPUs()
	if err != nil {
		return nil
	}
	cores := firstThreads("/", cpus)
	if (n == 0 || len(cores) < n) && underLauncher() {
		if set, err := sys.CpusetCPUs("/"); err == nil {
			cores = firstThreads("/", set)
		}
	}
	return cores
}

// firstThreads keeps, of cpus, the lowest-numbered of each core's
// hardware threads in cpus (its siblings from root's sysfs; a CPU whose
// siblings cannot be read counts as a core).
func firstThreads(root string, cpus []int) []int {
	var cores []int
	for _, c := range cpus {
		b, err := os.ReadFile(fmt.Sprintf("%s/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", root, c))
		if err != nil {
			cores = append(cores, c)
			continue
		}
		siblings, err := sys.ParseCPUList(strings.TrimSpace(string(b)))
		if err != nil || !slices.ContainsFunc(siblings, func(s int) bool { return s < c && slices.Contains(cpus, s) }) {
			cores = append(cores, c)
		}
	}
	return cores
}

// Placement says where a multi-rank spec's ranks are and who exchanges
// with whom ("" for a pair's patterns): "4 ranks on cpus 0,0,1,1 (rank r
// on the r-th); pairs 0-2 1-3".
func (s Spec) Placement() string {
	if !s.Pattern.MultiRank() {
		return ""
	}
	n := s.RankCount()
	where := fmt.Sprintf("%d ranks, not pinned", n)
	if len(s.CPUs) >= n {
		cpus := make([]string, n)
		for r := range n {
			cpus[r] = strconv.Itoa(s.CPUs[r])
		}
		where = fmt.Sprintf("%d ranks on cpus %s (rank r on the r-th)", n, strings.Join(cpus, ","))
	}
	switch s.Pattern {
	case Incast:
		return fmt.Sprintf("%s; ranks 1-%d send to rank 0", where, n-1)
	case AllToAll:
		return where + "; every rank exchanges with every other"
	case AllReduce, AllGather, ReduceScatter, Broadcast:
		return where + "; every rank in the collective"
	}
	pairs := make([]string, n/2)
	for i := range n / 2 {
		pairs[i] = fmt.Sprintf("%d-%d", i, i+n/2)
	}
	return where + "; pairs " + strings.Join(pairs, " ")
}
