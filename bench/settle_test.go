package bench

import (
	"slices"
	"strings"
	"testing"
)

func TestSettlingPoint(t *testing.T) {
	asked := []int{8, 64 << 10}
	for _, tc := range []struct {
		name      string
		settle    int
		ran       []int // the sizes the run's points came back with
		wantSizes []int // WithSettle's sizes
		wantErr   string
	}{
		{"none", 0, []int{8, 64 << 10}, []int{8, 64 << 10}, ""},
		{"4M first", 4 << 20, []int{4 << 20, 8, 64 << 10}, []int{4 << 20, 8, 64 << 10}, ""},
		{"a size asked for", 8, []int{8, 8, 64 << 10}, []int{8, 8, 64 << 10}, ""},
		{"missing", 4 << 20, []int{8, 64 << 10}, []int{4 << 20, 8, 64 << 10}, "no settling point of 4194304 bytes"},
		{"empty run", 4 << 20, nil, []int{4 << 20, 8, 64 << 10}, "no settling point"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := WithSettle(Spec{Sizes: asked}, tc.settle)
			if !slices.Equal(spec.Sizes, tc.wantSizes) {
				t.Fatalf("WithSettle sizes %v, want %v", spec.Sizes, tc.wantSizes)
			}
			res := Result{Spec: spec}
			for _, n := range tc.ran {
				res.Points = append(res.Points, Point{Size: n})
			}
			err := DropSettle(&res, tc.settle, asked)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("DropSettle error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, p := range res.Points {
				got = append(got, p.Size)
			}
			if !slices.Equal(got, asked) || !slices.Equal(res.Spec.Sizes, asked) {
				t.Fatalf("after DropSettle: points %v, spec sizes %v; want %v", got, res.Spec.Sizes, asked)
			}
		})
	}
	if asked[0] != 8 || len(asked) != 2 {
		t.Fatalf("WithSettle changed the caller's sizes: %v", asked)
	}
}
