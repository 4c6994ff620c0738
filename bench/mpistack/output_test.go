package mpistack

import (
	"slices"
	"strings"
	"testing"
)

// goodOutput is anchor.c's output for sizes 8 and 64, 2 repetitions, 3
// iterations.
const goodOutput = `size 8 3 1
rep 8 0 0.25
rep 8 1 0.5
iter 8 0.2
iter 8 0.3
iter 8 0.4
size 64 3 1
rep 64 0 1e+01
rep 64 1 11
iter 64 9
iter 64 10
iter 64 12
end
`

func TestParseOutput(t *testing.T) {
	out, err := parseOutput(strings.NewReader(goodOutput), []int{8, 64}, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []sizeOutput{
		{size: 8, iters: 3, warmup: 1, reps: []float64{0.25, 0.5}, perIter: []float64{0.2, 0.3, 0.4}},
		{size: 64, iters: 3, warmup: 1, reps: []float64{10, 11}, perIter: []float64{9, 10, 12}},
	}
	if len(out) != len(want) {
		t.Fatalf("got %d sizes, want %d", len(out), len(want))
	}
	for i, w := range want {
		o := out[i]
		if o.size != w.size || o.iters != w.iters || o.warmup != w.warmup ||
			!slices.Equal(o.reps, w.reps) || !slices.Equal(o.perIter, w.perIter) {
			t.Errorf("size %d: got %+v, want %+v", w.size, o, w)
		}
	}
}

// TestParseOutputRejects replaces or cuts goodOutput and checks the error
// names the offending line and says what is wrong.
func TestParseOutputRejects(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(goodOutput, "\n"), "\n")
	with := func(n int, text string) string { // line n (1-based) replaced
		l := slices.Clone(lines)
		l[n-1] = text
		return strings.Join(l, "\n") + "\n"
	}
	upTo := func(n int) string { return strings.Join(lines[:n], "\n") + "\n" }

	tests := []struct {
		name, input string
		want        []string // substrings of the error
	}{
		{"unknown record", with(3, "rap 8 1 0.5"), []string{"line 3:", `unknown record "rap"`}},
		{"empty line", with(4, ""), []string{"line 4:", "empty line"}},
		{"missing field", with(2, "rep 8 0"), []string{"line 2:", "wants 3 fields"}},
		{"bad number", with(5, "iter 8 fast"), []string{"line 5:", "invalid syntax"}},
		{"not finite", with(6, "iter 8 NaN"), []string{"line 6:", "not a finite"}},
		{"negative", with(8, "rep 64 0 -1"), []string{"line 8:", "non-negative"}},
		{"wrong size", with(9, "rep 8 1 11"), []string{"line 9:", "size 8 inside size 64"}},
		{"rep out of order", with(3, "rep 8 0 0.5"), []string{"line 3:", "repetition 0 out of order"}},
		{"too many iterations", with(7, "iter 8 0.5"), []string{"line 7:", "more than 3 iterations"}},
		{"record before size", with(1, "rep 8 0 0.25"), []string{"line 1:", "before any size"}},
		{"unexpected size", with(7, "size 128 3 1"), []string{"line 7:", "size 128 where size 64 was expected"}},
		{"incomplete size", with(6, "size 64 3 1"), []string{"line 6:", "size 8 has 2 of 3 iteration values"}},
		{"text after end", goodOutput + "extra\n", []string{"line 14:", "after the end marker"}},
		{"early end", upTo(6) + "end\n", []string{"line 7:", "end marker before sizes [64]"}},
		{"missing sizes", upTo(6), []string{"ends at line 6", "missing sizes [64]"}},
		{"truncated size", upTo(4), []string{"ends at line 4", "size 8 has 1 of 3 iteration values"}},
		{"empty", "", []string{"ends at line 0", "missing sizes [8 64]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseOutput(strings.NewReader(tt.input), []int{8, 64}, 2)
			if err == nil {
				t.Fatal("malformed output accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseOutputChecksRepetitionCount(t *testing.T) {
	_, err := parseOutput(strings.NewReader(goodOutput), []int{8, 64}, 3)
	if err == nil || !strings.Contains(err.Error(), "line 7: size 8 has 2 of 3 repetitions") {
		t.Fatalf("got %v, want a complaint about size 8's repetitions at line 7", err)
	}
}
