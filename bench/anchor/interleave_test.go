package anchor

import (
	"context"
	"slices"
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
	res, err := Interleave(context.Background(), cs, bench.Spec{Pattern: bench.Latency, Sizes: []int{8, 64}}, 3, 0, nil)
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
	res, err := Interleave(context.Background(), []Contender{c}, bench.Spec{Pattern: bench.Bandwidth, Sizes: []int{4, 8}}, 2, 8, nil)
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
	if _, err := Interleave(context.Background(), []Contender{bad}, bench.Spec{Sizes: []int{4}}, 1, 8, nil); err == nil {
		t.Error("a run without its settling point was accepted")
	}
}
