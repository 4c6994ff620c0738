package mpistack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
)

func TestInterleaveRotatesAndPools(t *testing.T) {
	var order []string
	mk := func(label string, ours bool, base float64) Contender {
		n := 0
		return Contender{Label: label, Ours: ours, Run: func(_ context.Context, s bench.Spec) (bench.Result, error) {
			if s.Reps != 1 {
				t.Errorf("%s ran with reps %d, want 1", label, s.Reps)
			}
			order = append(order, label)
			n++
			var pts []bench.Point
			for _, size := range s.Sizes {
				pts = append(pts, bench.Point{Size: size, Samples: []float64{base + float64(n)}, Unit: "us"})
			}
			return bench.Result{Label: "ignored", Spec: s, Points: pts}, nil
		}}
	}
	cs := []Contender{mk("a", true, 10), mk("b", false, 20), mk("c", false, 30)}
	res, err := Interleave(context.Background(), cs, bench.Spec{Pattern: bench.Latency, Sizes: []int{8, 64}}, 3, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "b", "c", "a", "c", "a", "b"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	for i, r := range res {
		if r.Label != cs[i].Label || r.Spec.Reps != 3 || len(r.Points) != 2 {
			t.Fatalf("result %d: %+v", i, r)
		}
		for _, p := range r.Points {
			base := float64(10 * (i + 1))
			if !slices.Equal(p.Samples, []float64{base + 1, base + 2, base + 3}) || p.Median != base+2 {
				t.Errorf("%s size %d: samples %v median %v", r.Label, p.Size, p.Samples, p.Median)
			}
		}
	}
	ours, theirs := Split(cs, res)
	if len(ours) != 1 || len(theirs) != 2 || ours[0].Label != "a" {
		t.Errorf("split: %d ours, %d theirs", len(ours), len(theirs))
	}
}

func TestInterleaveSettlePointIsRunFirstAndDropped(t *testing.T) {
	var seen [][]int
	c := Contender{Label: "a", Ours: true, Run: func(_ context.Context, s bench.Spec) (bench.Result, error) {
		seen = append(seen, slices.Clone(s.Sizes))
		var pts []bench.Point
		for k, size := range s.Sizes {
			pts = append(pts, bench.Point{Size: size, Samples: []float64{float64(100*k + size)}, Unit: "MB/s"})
		}
		return bench.Result{Spec: s, Points: pts}, nil
	}}
	res, err := Interleave(context.Background(), []Contender{c}, bench.Spec{Pattern: bench.Bandwidth, Sizes: []int{4, 8}}, 2, 8, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range seen {
		if !slices.Equal(s, []int{8, 4, 8}) {
			t.Errorf("ran sizes %v, want the settling size first: [8 4 8]", s)
		}
	}
	r := res[0]
	if !slices.Equal(r.Spec.Sizes, []int{4, 8}) || len(r.Points) != 2 {
		t.Fatalf("result sizes %v, %d points: the settling point must not be reported", r.Spec.Sizes, len(r.Points))
	}
	// The 8-byte point is the third one run (value 208), never the settling one (8).
	if got := r.Points[1].Samples; !slices.Equal(got, []float64{208, 208}) {
		t.Errorf("8-byte samples %v, want [208 208] from the measured point", got)
	}

	bad := Contender{Label: "b", Run: func(_ context.Context, s bench.Spec) (bench.Result, error) {
		return bench.Result{Spec: s, Points: []bench.Point{{Size: 4}}}, nil
	}}
	if _, err := Interleave(context.Background(), []Contender{bad}, bench.Spec{Sizes: []int{4}}, 1, 8, 0, nil); err == nil {
		t.Error("a run without its settling point was accepted")
	}
}

// With blocks, every round measures each block of sizes with every
// contender before the next block, and the pooled result is the same
// shape as a whole-ladder run: every size, in order, one sample per round.
func TestInterleaveBlocksMeasureSizesTogether(t *testing.T) {
	type run struct {
		label string
		sizes []int
	}
	var runs []run
	mk := func(label string) Contender {
		n := 0
		return Contender{Label: label, Run: func(_ context.Context, s bench.Spec) (bench.Result, error) {
			runs = append(runs, run{label, slices.Clone(s.Sizes)})
			n++
			var pts []bench.Point
			for _, size := range s.Sizes {
				pts = append(pts, bench.Point{Size: size, Samples: []float64{float64(1000*n + size)}, Unit: "MB/s", Iters: size})
			}
			return bench.Result{Spec: s, Points: pts}, nil
		}}
	}
	cs := []Contender{mk("a"), mk("b")}
	sizes := []int{4, 8, 16}
	res, err := Interleave(context.Background(), cs, bench.Spec{Pattern: bench.Bandwidth, Sizes: sizes}, 2, 64, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []run{
		{"a", []int{64, 4, 8}}, {"b", []int{64, 4, 8}}, {"a", []int{64, 16}}, {"b", []int{64, 16}},
		{"b", []int{64, 4, 8}}, {"a", []int{64, 4, 8}}, {"b", []int{64, 16}}, {"a", []int{64, 16}},
	}
	if len(runs) != len(want) {
		t.Fatalf("%d runs, want %d: %v", len(runs), len(want), runs)
	}
	for k := range want {
		if runs[k].label != want[k].label || !slices.Equal(runs[k].sizes, want[k].sizes) {
			t.Errorf("run %d: %s %v, want %s %v", k, runs[k].label, runs[k].sizes, want[k].label, want[k].sizes)
		}
	}
	for i, r := range res {
		if !slices.Equal(r.Spec.Sizes, sizes) || r.Spec.Reps != 2 || len(r.Points) != len(sizes) {
			t.Fatalf("result %d: sizes %v reps %d, %d points", i, r.Spec.Sizes, r.Spec.Reps, len(r.Points))
		}
		for k, p := range r.Points {
			// Each contender's runs alternate blocks: its n-th run is block
			// (n-1)%2 of round (n-1)/2, so round k's sample of a size is
			// from run 2k+1 (first block) or 2k+2 (second).
			off := 1
			if p.Size == 16 {
				off = 2
			}
			wantSamples := []float64{float64(1000*off + p.Size), float64(1000*(2+off) + p.Size)}
			if p.Size != sizes[k] || !slices.Equal(p.Samples, wantSamples) || p.Iters != p.Size {
				t.Errorf("%s point %d: size %d samples %v iters %d, want size %d samples %v", r.Label, k, p.Size, p.Samples, p.Iters, sizes[k], wantSamples)
			}
		}
	}
	if _, err := Interleave(context.Background(), cs, bench.Spec{Sizes: sizes}, 1, 0, -1, nil); err == nil {
		t.Error("a negative block was accepted")
	}
}

func TestSizeBlocks(t *testing.T) {
	sizes := []int{1, 2, 3, 4, 5}
	for _, c := range []struct {
		block int
		want  [][]int
	}{
		{0, [][]int{{1, 2, 3, 4, 5}}},
		{5, [][]int{{1, 2, 3, 4, 5}}},
		{9, [][]int{{1, 2, 3, 4, 5}}},
		{2, [][]int{{1, 2}, {3, 4}, {5}}},
		{1, [][]int{{1}, {2}, {3}, {4}, {5}}},
	} {
		got := sizeBlocks(sizes, c.block)
		if !slices.EqualFunc(got, c.want, slices.Equal[[]int]) {
			t.Errorf("block %d: %v, want %v", c.block, got, c.want)
		}
	}
}

// meterLog records what Interleave tells its meter.
type meterLog []string

func (l *meterLog) Plan(stage string, runs int) {
	*l = append(*l, fmt.Sprintf("plan %s %d", stage, runs))
}
func (l *meterLog) Step(stage, line string) { *l = append(*l, stage+": "+line) }

// The meter hears the pattern's planned runs (rounds x blocks x
// contenders) first, then each run as it ends, naming its round,
// contender and block; a run that fails is not counted; Lines writes the
// runs' lines.
func TestInterleaveTellsTheMeter(t *testing.T) {
	ok := func(label string) Contender {
		return Contender{Label: label, Run: func(_ context.Context, s bench.Spec) (bench.Result, error) {
			var pts []bench.Point
			for _, size := range s.Sizes {
				pts = append(pts, bench.Point{Size: size, Samples: []float64{1}, Unit: "MB/s"})
			}
			return bench.Result{Spec: s, Points: pts}, nil
		}}
	}
	failing := Contender{Label: "bad", Run: func(context.Context, bench.Spec) (bench.Result, error) {
		return bench.Result{}, errors.New("no")
	}}
	for _, c := range []struct {
		name  string
		cs    []Contender
		sizes []int
		block int
		want  []string
		fails bool
	}{
		{"whole ladder", []Contender{ok("a"), ok("b")}, []int{4, 8}, 0, []string{
			"plan bw 4", "bw: round 1/2: a bw", "bw: round 1/2: b bw", "bw: round 2/2: b bw", "bw: round 2/2: a bw"}, false},
		{"blocks", []Contender{ok("a")}, []int{4, 8, 16}, 2, []string{
			"plan bw 4", "bw: round 1/2: a bw (sizes 4-8)", "bw: round 1/2: a bw (size 16)",
			"bw: round 2/2: a bw (sizes 4-8)", "bw: round 2/2: a bw (size 16)"}, false},
		{"a run fails", []Contender{ok("a"), failing}, []int{4}, 0, []string{"plan bw 4", "bw: round 1/2: a bw"}, true},
	} {
		var got meterLog
		_, err := Interleave(context.Background(), c.cs, bench.Spec{Pattern: bench.Bandwidth, Sizes: c.sizes}, 2, 0, c.block, &got)
		if (err != nil) != c.fails || !slices.Equal(got, c.want) {
			t.Errorf("%s: error %v, meter heard\n%q\nwant\n%q", c.name, err, got, c.want)
		}
	}

	var b strings.Builder
	if _, err := Interleave(context.Background(), []Contender{ok("a")}, bench.Spec{Pattern: bench.Latency, Sizes: []int{8}}, 2, 0, 0, Lines(&b)); err != nil {
		t.Fatal(err)
	}
	if want := "round 1/2: a latency\nround 2/2: a latency\n"; b.String() != want {
		t.Errorf("Lines wrote %q, want %q", b.String(), want)
	}
	if Lines(nil) != nil {
		t.Error("Lines(nil) is a meter: Interleave would call it")
	}
}
