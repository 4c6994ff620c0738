package stack

import (
	"context"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/anchor"
)

// fake is a stack without MPI: x=b is 1.5x the default's bandwidth at
// every size, and costs latency by the factor latency.
type fake struct{ latency float64 }

func (*fake) Name() string                          { return "openmpi" }
func (*fake) Prepare(context.Context, string) error { return nil }
func (*fake) Space() []Param {
	return []Param{{Name: "x", Values: []string{"a", "b"}, Pattern: bench.Bandwidth, Sizes: []int{4096, 65536}}}
}
func (*fake) Check(context.Context, string, map[string]string) error { return nil }
func (f *fake) Contender(_, label string, params map[string]string) anchor.Contender {
	return anchor.Contender{Label: label, Run: func(_ context.Context, spec bench.Spec) (bench.Result, error) {
		v := 100.0
		if params["x"] == "b" {
			v = 150
			if spec.Pattern == bench.Latency {
				v = 100 * f.latency
			}
		} else if spec.Pattern == bench.Latency {
			v = 100
		}
		res := bench.Result{Label: label, Spec: spec}
		for _, n := range spec.Sizes {
			res.Points = append(res.Points, bench.Point{Size: n, Samples: []float64{v}})
		}
		return res, nil
	}}
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
type spaced struct{ measured map[string]bool }

func (*spaced) Name() string                                           { return "openmpi" }
func (*spaced) Prepare(context.Context, string) error                  { return nil }
func (*spaced) Check(context.Context, string, map[string]string) error { return nil }
func (*spaced) Space() []Param {
	sizes := []int{4096, 65536}
	return []Param{
		{Name: "mode", Values: []string{"slow", "fast"}, Pattern: bench.Bandwidth, Sizes: sizes,
			With: map[string]map[string]string{"fast": {"mode_extra": "on"}}},
		{Name: "y", Values: []string{"1", "2"}, Pattern: bench.Bandwidth, Sizes: sizes, Unless: map[string]string{"mode": "fast"}},
	}
}
func (s *spaced) Contender(_, label string, params map[string]string) anchor.Contender {
	return anchor.Contender{Label: label, Run: func(_ context.Context, spec bench.Spec) (bench.Result, error) {
		if _, ok := params["y"]; ok {
			s.measured["y"] = true
		}
		v := 100.0
		if params["mode"] == "fast" && params["mode_extra"] == "on" && spec.Pattern == bench.Bandwidth {
			v = 150
		}
		res := bench.Result{Label: label, Spec: spec}
		for _, n := range spec.Sizes {
			res.Points = append(res.Points, bench.Point{Size: n, Samples: []float64{v}})
		}
		return res, nil
	}}
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
