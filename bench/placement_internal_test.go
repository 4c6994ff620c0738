package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// Ranks spread evenly over the cores, pairs i, i+N/2 across the halves;
// more ranks than cores share them, neighbours together.
func TestSpread(t *testing.T) {
	for _, c := range []struct {
		cores []int
		n     int
		want  []int
	}{
		{[]int{0, 1, 2, 3, 4, 5, 6, 7}, 4, []int{0, 2, 4, 6}},
		{[]int{0, 1, 2, 3, 4, 5, 6, 7}, 8, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{[]int{0, 1}, 4, []int{0, 0, 1, 1}},
		{[]int{4, 5, 6}, 3, []int{4, 5, 6}},
		{nil, 4, nil},
	} {
		if got := spread(c.cores, c.n); !slices.Equal(got, c.want) {
			t.Errorf("spread(%v, %d) = %v, want %v", c.cores, c.n, got, c.want)
		}
	}
}

// One CPU per core: the lowest of each core's hardware threads among the
// CPUs given; a CPU whose siblings are unknown is a core of its own.
func TestFirstThreads(t *testing.T) {
	root := t.TempDir()
	for cpu, siblings := range map[int]string{0: "0,4", 1: "1,5", 2: "2-3", 3: "2-3", 4: "0,4", 5: "1,5"} {
		dir := filepath.Join(root, "sys/devices/system/cpu", "cpu"+strconv.Itoa(cpu), "topology")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "thread_siblings_list"), []byte(siblings+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ cpus, want []int }{
		{[]int{0, 1, 2, 3, 4, 5}, []int{0, 1, 2}},
		{[]int{3, 4, 5}, []int{3, 4, 5}}, // their siblings are outside the set
		{[]int{0, 4, 9}, []int{0, 9}},
	} {
		if got := firstThreads(root, c.cpus); !slices.Equal(got, c.want) {
			t.Errorf("firstThreads(%v) = %v, want %v", c.cpus, got, c.want)
		}
	}
}

// The placement line names each rank's CPU and who exchanges with whom.
func TestPlacement(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Pattern: MultiLatency, Ranks: 6, CPUs: []int{0, 2, 4, 6, 8, 10}}, "6 ranks on cpus 0,2,4,6,8,10 (rank r on the r-th); pairs 0-3 1-4 2-5"},
		{Spec{Pattern: Incast, Ranks: 3}, "3 ranks, not pinned; ranks 1-2 send to rank 0"},
		{Spec{Pattern: AllToAll}, "2 ranks, not pinned; every rank exchanges with every other"},
		{Spec{Pattern: Latency, CPUs: []int{0, 1}}, ""},
	} {
		if got := c.spec.Placement(); got != c.want {
			t.Errorf("%s: %q, want %q", c.spec.Pattern, got, c.want)
		}
	}
}
