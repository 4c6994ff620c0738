package search

import (
	"slices"
	"testing"
)

func series(base float64, n int, spread float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = base * (1 + spread*float64(i%5-2)/2)
	}
	return v
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name         string
		a, b         []float64
		higherBetter bool
		want         Outcome
	}{
		{"b clearly faster bandwidth", series(100, 10, 0.01), series(150, 10, 0.01), true, BWins},
		{"a clearly faster bandwidth", series(150, 10, 0.01), series(100, 10, 0.01), true, AWins},
		{"lower latency wins", series(0.20, 10, 0.01), series(0.10, 10, 0.01), false, BWins},
		{"higher latency loses", series(0.10, 10, 0.01), series(0.20, 10, 0.01), false, AWins},
		{"within noise", series(100, 10, 0.01), series(101.5, 10, 0.01), true, Tie},
		{"too few samples to tell", []float64{100, 120}, []float64{150, 130}, true, Unsettled},
		{"overlapping wide samples differing beyond noise", series(100, 12, 0.5), series(108, 12, 0.5), true, Unsettled},
		{"no samples", nil, series(1, 3, 0), true, Unsettled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := slices.Clone(tc.a), slices.Clone(tc.b)
			c := Compare(tc.a, tc.b, tc.higherBetter)
			if c.Outcome != tc.want {
				t.Fatalf("Compare = %v, want %v", c, tc.want)
			}
			if !slices.Equal(a, tc.a) || !slices.Equal(b, tc.b) {
				t.Fatal("Compare reordered its inputs")
			}
		})
	}
}

func TestBisect(t *testing.T) {
	winners := map[int]string{1024: "sm", 4096: "sm", 16384: "cma", 65536: "cma", 262144: "sm", 524288: "cma"}
	got := Bisect([]int{1024, 4096, 16384, 65536, 262144, 524288}, func(n int) string { return winners[n] })
	// 4K→16K differ: 8K; 64K→256K differ: 128K; 256K→512K differ but are one doubling apart.
	if want := []int{8192, 131072}; !slices.Equal(got, want) {
		t.Fatalf("Bisect = %v, want %v", got, want)
	}
	if got := Bisect([]int{1024, 1 << 20}, func(n int) string { return map[int]string{1024: "a", 1 << 20: "b"}[n] }); !slices.Equal(got, []int{32768}) {
		t.Fatalf("Bisect over 1K..1M = %v, want [32768]", got)
	}
}

func TestMedian(t *testing.T) {
	if m := Median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Fatalf("Median = %v", m)
	}
	if Median(nil) != 0 {
		t.Fatal("Median(nil) != 0")
	}
}
