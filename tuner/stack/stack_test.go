package stack

import (
	"slices"
	"testing"

	"github.com/gotune/gotune/bench"
)

// result is a pooled result whose points hold one sample per round.
func result(label string, samples map[int][]float64) bench.Result {
	r := bench.Result{Label: label}
	for _, size := range []int{4096, 65536, 1 << 20} {
		if s, ok := samples[size]; ok {
			r.Points = append(r.Points, bench.Point{Size: size, Samples: s})
		}
	}
	return r
}

func TestChoose(t *testing.T) {
	def := result("default", map[int][]float64{4096: {100, 101, 99, 100, 102}, 65536: {100, 98, 101, 100, 99}, 1 << 20: {100, 100, 101, 99, 100}})
	better := result("better", map[int][]float64{4096: {140, 141, 139, 142, 140}, 65536: {150, 149, 151, 150, 148}, 1 << 20: {130, 131, 129, 130, 132}})
	mixed := result("mixed", map[int][]float64{4096: {60, 61, 59, 60, 62}, 65536: {300, 301, 299, 300, 302}, 1 << 20: {300, 298, 301, 300, 299}})
	// Rounds that swing by 2x together: 5% ahead in every one of them is a
	// consistent lead (a U test over the pooled values never saw it); a
	// lead that comes and goes between rounds is not.
	noisyDef := result("noisy default", map[int][]float64{4096: {100, 60, 140, 80, 120}, 65536: {100, 60, 140, 80, 120}, 1 << 20: {100, 60, 140, 80, 120}})
	noisyLead := result("noisy lead", map[int][]float64{4096: {105, 63, 147, 84, 126}, 65536: {105, 63, 147, 84, 126}, 1 << 20: {105, 63, 147, 84, 126}})
	wavering := result("wavering lead", map[int][]float64{4096: {108, 57, 151, 77, 127}, 65536: {104, 58, 150, 78, 129}, 1 << 20: {109, 58, 148, 77, 126}})
	same := result("same", map[int][]float64{4096: {101, 100, 99, 100, 101}, 65536: {100, 99, 101, 100, 100}, 1 << 20: {99, 100, 101, 100, 100}})
	for _, tc := range []struct {
		name    string
		results []bench.Result
		want    string
	}{
		{"a value better everywhere wins", []bench.Result{def, same, better}, "c"},
		{"a value that loses at one size stays out, whatever its geomean", []bench.Result{def, mixed}, "a"},
		{"equal within noise: the default stands", []bench.Result{def, same}, "a"},
		{"the better of two that both win", []bench.Result{def, better, mixed, same}, "b"},
		{"a lead consistent through rounds that swing together wins", []bench.Result{noisyDef, noisyLead}, "b"},
		{"a lead that comes and goes between rounds: the default stands", []bench.Result{noisyDef, wavering}, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Param{Name: "x", Values: []string{"a", "b", "c", "d"}[:len(tc.results)], Pattern: bench.Bandwidth, Sizes: []int{4096, 65536, 1 << 20}}
			c := choose(p, tc.results)
			if c.Chosen != tc.want {
				t.Errorf("chose %s, want %s (scores %v, verdicts %v)", c.Chosen, tc.want, c.Scores, c.Verdicts)
			}
			if c.Scores[0] != 1 {
				t.Errorf("the default scores %v against itself", c.Scores[0])
			}
		})
	}
}

// Latency is better lower: a faster value scores above 1.
func TestAgainstLatency(t *testing.T) {
	a := result("a", map[int][]float64{4096: {2, 2.1, 2, 1.9, 2}})
	b := result("b", map[int][]float64{4096: {1, 1.05, 1, 0.95, 1}})
	score, verdicts, lost := against(a, b, false)
	if score < 1.9 || score > 2.1 || lost || len(verdicts) != 1 {
		t.Errorf("score %v, lost %v, verdicts %v: want about 2, not lost", score, lost, verdicts)
	}
}

func TestEvidence(t *testing.T) {
	p := Param{Name: "x", Values: []string{"a", "b"}, Pattern: bench.Bandwidth, Sizes: []int{4096, 65536, 1 << 20}}
	def := result("default", map[int][]float64{4096: {100, 101, 99, 100, 102}, 65536: {100, 98, 101, 100, 99}, 1 << 20: {100, 100, 101, 99, 100}})
	better := result("better", map[int][]float64{4096: {140, 141, 139, 142, 140}, 65536: {150, 149, 151, 150, 148}, 1 << 20: {130, 131, 129, 130, 132}})
	c := choose(p, []bench.Result{def, better})
	if got, want := c.Evidence(5), "bw 4K-1M geomean 1.40x over the default a (5 interleaved rounds; better, settled, at 3 of 3 sizes, worse at none)"; got != want {
		t.Errorf("evidence %q, want %q", got, want)
	}
	c = choose(p, []bench.Result{def, def})
	if got, want := c.Evidence(5), "default kept: bw 4K-1M, 5 interleaved rounds; the others against it: b 1.00x"; got != want {
		t.Errorf("evidence %q, want %q", got, want)
	}
}

// MPICH weighs the CH4 POSIX iqueue only where it carries intranode
// messages; over a ch4:ucx device only the progress loop's knob acts.
func TestMPICHSpaceByDevice(t *testing.T) {
	for _, tc := range []struct {
		device string
		want   []string
	}{
		{"ch4:ucx", []string{"polls_before_yield"}},
		{"ch4:ofi", []string{"ch4_shm_posix_iqueue_cell_size", "ch4_shm_posix_iqueue_num_cells", "polls_before_yield"}},
		{"", []string{"ch4_shm_posix_iqueue_cell_size", "ch4_shm_posix_iqueue_num_cells", "polls_before_yield"}},
	} {
		var got []string
		for _, p := range (&MPICH{device: tc.device}).Space() {
			got = append(got, p.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("device %q: space %v, want %v", tc.device, got, tc.want)
		}
	}
}
