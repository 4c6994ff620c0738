package stack

import (
	"context"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
)

// noMPI is what the test stacks share: named openmpi, they need no
// preparing and pass every check.
type noMPI struct{}

func (noMPI) Name() string                                           { return "openmpi" }
func (noMPI) Prepare(context.Context, string) error                  { return nil }
func (noMPI) Check(context.Context, string, map[string]string) error { return nil }

// measured is a contender that measures value(spec, size) at every size of
// a spec.
func measured(label string, value func(spec bench.Spec, size int) float64) mpistack.Contender {
	return mpistack.Contender{Label: label, Run: func(_ context.Context, spec bench.Spec) (bench.Result, error) {
		res := bench.Result{Label: label, Spec: spec}
		for _, n := range spec.Sizes {
			res.Points = append(res.Points, bench.Point{Size: n, Samples: []float64{value(spec, n)}})
		}
		return res, nil
	}}
}

// fake is a stack without MPI: x=b is 1.5x the default's bandwidth at
// every size, and costs latency by the factor latency.
type fake struct {
	noMPI
	latency float64
}

func (*fake) Space() []Param {
	return []Param{{Name: "x", Values: []string{"a", "b"}, Pattern: bench.Bandwidth, Sizes: []int{4096, 65536}}}
}
func (f *fake) Contender(_, label string, params map[string]string) mpistack.Contender {
	return measured(label, func(spec bench.Spec, _ int) float64 {
		switch {
		case params["x"] != "b":
			return 100
		case spec.Pattern == bench.Latency:
			return 100 * f.latency
		default:
			return 150
		}
	})
}

// The chosen values stand together only if 8-byte latency loses no more
// than the noise, settled or not.
func TestConfirmGuardsLatency(t *testing.T) {
	for _, tc := range []struct {
		latency float64 // tuned/default 8-byte latency
		kept    bool
	}{
		{1.0, true},
		{1.02, true},
		{1.2, false},
	} {
		res, err := Tune(context.Background(), &fake{latency: tc.latency}, Config{Dir: t.TempDir(), Rounds: 5, ConfirmSizes: []int{4096}})
		if err != nil {
			t.Fatal(err)
		}
		if _, kept := res.Params["x"]; kept != tc.kept || (res.Note == "") != tc.kept {
			t.Errorf("latency x%.2f: params %v, note %q; want kept=%v", tc.latency, res.Params, res.Note, tc.kept)
		}
	}
}

// spaced is a stack whose mode=fast gains only with the setting it needs
// (its With), and whose y is moot under it.
type spaced struct {
	noMPI
	measured map[string]bool
}

func (*spaced) Space() []Param {
	sizes := []int{4096, 65536}
	return []Param{
		{Name: "mode", Values: []string{"slow", "fast"}, Pattern: bench.Bandwidth, Sizes: sizes,
			With: map[string]map[string]string{"fast": {"mode_extra": "on"}}},
		{Name: "y", Values: []string{"1", "2"}, Pattern: bench.Bandwidth, Sizes: sizes, Unless: map[string]string{"mode": "fast"}},
	}
}
func (s *spaced) Contender(_, label string, params map[string]string) mpistack.Contender {
	return measured(label, func(spec bench.Spec, _ int) float64 {
		if _, ok := params["y"]; ok {
			s.measured["y"] = true
		}
		if params["mode"] == "fast" && params["mode_extra"] == "on" && spec.Pattern == bench.Bandwidth {
			return 150
		}
		return 100
	})
}

func TestWithAndUnless(t *testing.T) {
	s := &spaced{measured: map[string]bool{}}
	res, err := Tune(context.Background(), s, Config{Dir: t.TempDir(), Rounds: 5, ConfirmSizes: []int{4096}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Params["mode"] != "fast" || res.Params["mode_extra"] != "on" {
		t.Errorf("params %v: want mode=fast with mode_extra=on", res.Params)
	}
	if s.measured["y"] || len(res.Choices) != 1 {
		t.Errorf("y was weighed (%d choices) though mode=fast makes it moot", len(res.Choices))
	}
}

// narrowing is a stack whose x=b gains 1.5x everywhere and whose y=2
// gains 1.2x at the sizes its own stage weighs but halves 32 KiB (the file
// then loses 25% there), which only the confirmation's ladder measures.
type narrowing struct{ noMPI }

func (narrowing) Space() []Param {
	sizes := []int{4096, 65536}
	return []Param{
		{Name: "x", Values: []string{"a", "b"}, Pattern: bench.Bandwidth, Sizes: sizes},
		{Name: "y", Values: []string{"1", "2"}, Pattern: bench.Bandwidth, Sizes: sizes},
	}
}
func (narrowing) Contender(_, label string, params map[string]string) mpistack.Contender {
	return measured(label, func(spec bench.Spec, n int) float64 {
		v := 100.0
		if spec.Pattern == bench.Bandwidth {
			if params["x"] == "b" {
				v *= 1.5
			}
			if params["y"] == "2" {
				v *= map[bool]float64{true: 0.5, false: 1.2}[n == 32768]
			}
		}
		return v
	})
}

// A file that loses settled at one size of the ladder is narrowed: the
// value behind the loss is dropped, the rest confirmed again, and what
// the file gains is said for its header.
func TestConfirmNarrowsAFileThatLosesAtASize(t *testing.T) {
	res, err := Tune(context.Background(), narrowing{}, Config{Dir: t.TempDir(), Rounds: 4, ConfirmSizes: []int{4096, 32768, 65536}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Params) != 1 || res.Params["x"] != "b" {
		t.Fatalf("params %v, want x=b alone", res.Params)
	}
	for _, want := range []string{"y=2", "32K", "-25"} {
		if !strings.Contains(res.Note, want) {
			t.Errorf("note %q lacks %q", res.Note, want)
		}
	}
	if want := "faster (settled) at 4K-64K, slower at none"; !strings.Contains(res.Gains, want) {
		t.Errorf("gains %q lacks %q", res.Gains, want)
	}
}
