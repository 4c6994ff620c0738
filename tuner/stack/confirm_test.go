package stack

import (
	"context"
	"errors"
	"slices"
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

// eager is a stack whose limit=16K gains most bandwidth but costs 8-byte
// latency 1.2x, while limit=8K gains less and costs none; limit=32K, the
// last value, wins nowhere. Where the milder value also costs latency
// (cost8K), nothing is left to narrow to. With struck8K, limit=8K ran on
// a slow pair at 64 KiB while its stage weighed it (0.9x the default
// there), and is as fast as elsewhere in every later run.
type eager struct {
	noMPI
	cost8K   float64
	struck8K bool
}

func (eager) Space() []Param {
	return []Param{{Name: "limit", Values: []string{"4K", "8K", "16K", "32K"}, Pattern: bench.Bandwidth, Sizes: []int{4096, 65536}}}
}
func (e eager) Contender(_, label string, params map[string]string) mpistack.Contender {
	gain := map[string]float64{"8K": 1.2, "16K": 1.4, "32K": 1.0}[params["limit"]]
	cost := map[string]float64{"8K": e.cost8K, "16K": 1.2, "32K": 1.0}[params["limit"]]
	return measured(label, func(spec bench.Spec, n int) float64 {
		switch {
		case params["limit"] == "":
			return 100
		case spec.Pattern == bench.Latency:
			return 100 * cost
		case e.struck8K && label == "limit=8K" && n == 65536:
			return 90
		default:
			return 100 * gain
		}
	})
}

// A value that makes the file lose gives way to its parameter's runner-up
// (one that also won its stage somewhere, even where it lost at a size
// there: the confirmation measures that size again), which the file is
// confirmed with; only when no runner-up is left is the parameter dropped.
func TestConfirmNarrowsToTheRunnerUp(t *testing.T) {
	for _, tc := range []struct {
		cost8K   float64
		struck8K bool
		want     string // limit in the file, "" for none
		note     []string
	}{
		{1.0, false, "8K", []string{"narrowed limit=16K to 8K", "8-byte latency"}},
		{1.0, true, "8K", []string{"narrowed limit=16K to 8K", "8-byte latency"}},
		{1.2, false, "", []string{"narrowed limit=16K to 8K", "dropped limit=8K", "defaults kept"}},
	} {
		res, err := Tune(context.Background(), eager{cost8K: tc.cost8K, struck8K: tc.struck8K}, Config{Dir: t.TempDir(), Rounds: 5, ConfirmSizes: []int{4096, 65536}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Params["limit"] != tc.want {
			t.Errorf("8K costing latency x%.1f: params %v, want limit=%q", tc.cost8K, res.Params, tc.want)
		}
		for _, want := range tc.note {
			if !strings.Contains(res.Note, want) {
				t.Errorf("8K costing latency x%.1f: note %q lacks %q", tc.cost8K, res.Note, want)
			}
		}
		if got := res.Choices[0].Chosen; tc.want != "" && got != tc.want {
			t.Errorf("the choice's value is %q, the file's %q: its evidence would describe another value", got, tc.want)
		}
	}
}

// unlucky is a stack whose x=b gains 1.5x everywhere, but whose file's
// first confirmation rounds at 32 KiB ran on a slow pair of processes
// (0.8x the defaults); every later run gains there too.
type unlucky struct {
	noMPI
	slowRuns int // confirmation runs of the tuned file at 32 KiB that are slow
	runs     int
}

func (*unlucky) Space() []Param {
	return []Param{{Name: "x", Values: []string{"a", "b"}, Pattern: bench.Bandwidth, Sizes: []int{4096, 65536}}}
}
func (u *unlucky) Contender(_, label string, params map[string]string) mpistack.Contender {
	c := measured(label, func(spec bench.Spec, n int) float64 {
		switch {
		case params["x"] != "b" || spec.Pattern != bench.Bandwidth:
			return 100
		case n == 32768 && u.runs <= u.slowRuns:
			return 80
		default:
			return 150
		}
	})
	run := c.Run
	c.Run = func(ctx context.Context, spec bench.Spec) (bench.Result, error) {
		if params["x"] == "b" && slices.Contains(spec.Sizes, 32768) {
			u.runs++
		}
		return run(ctx, spec)
	}
	return c
}

// A loss the confirmation finds is measured again before it strikes a
// value: a loss that held only in the first rounds leaves the file as it
// is, one that holds in all of them narrows it.
func TestConfirmMeasuresALossAgain(t *testing.T) {
	for _, tc := range []struct {
		name     string
		slowRuns int
		ladder   []int
		memo     Memo
		kept     bool
	}{
		{"slow in the first rounds only", 4, []int{4096, 32768, 65536}, nil, true},
		{"slow in every round", 1 << 20, []int{4096, 32768, 65536}, nil, false},
		// The second set of rounds measures what the first did, and a
		// memo keeps them apart.
		{"slow in the first rounds at the whole ladder, kept in a memo", 4, []int{32768}, &mapMemo{kept: map[string][]bench.Result{}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unlucky{slowRuns: tc.slowRuns}
			res, err := Tune(context.Background(), u, Config{Dir: t.TempDir(), Rounds: 4, ConfirmSizes: tc.ladder, Memo: tc.memo})
			if err != nil {
				t.Fatal(err)
			}
			if _, kept := res.Params["x"]; kept != tc.kept {
				t.Fatalf("params %v, note %q: want x=b kept=%v", res.Params, res.Note, tc.kept)
			}
			if got := res.Confirm[0].Again; !slices.Equal(got, []int{32768}) {
				t.Errorf("measured again at %v, want [32768]", got)
			}
			if u.runs != 8 {
				t.Errorf("the tuned file ran %d times at 32 KiB, want 4 rounds and 4 more", u.runs)
			}
		})
	}
}

// mapMemo is a Memo in memory that counts what it recalls.
type mapMemo struct {
	kept     map[string][]bench.Result
	recalled int
}

func (m *mapMemo) Recall(key string) ([]bench.Result, bool) {
	r, ok := m.kept[key]
	if ok {
		m.recalled++
	}
	return r, ok
}
func (m *mapMemo) Keep(key string, results []bench.Result) error {
	m.kept[key] = results
	return nil
}

// failing is narrowing whose runs fail once n have run (a killed tuning).
type failing struct {
	narrowing
	n, runs int
}

func (f *failing) Contender(dir, label string, params map[string]string) mpistack.Contender {
	c := f.narrowing.Contender(dir, label, params)
	run := c.Run
	c.Run = func(ctx context.Context, spec bench.Spec) (bench.Result, error) {
		if f.runs++; f.runs > f.n {
			return bench.Result{}, errors.New("killed")
		}
		return run(ctx, spec)
	}
	return c
}

// A tuning killed part way resumes from its memo: the steps it finished
// are recalled, not measured, and it decides what a whole run decides.
func TestTuneResumesFromItsMemo(t *testing.T) {
	cfg := Config{Dir: t.TempDir(), Rounds: 4, ConfirmSizes: []int{4096, 32768, 65536}}
	whole := &failing{n: 1 << 20}
	want, err := Tune(context.Background(), whole, cfg)
	if err != nil {
		t.Fatal(err)
	}
	memo := &mapMemo{kept: map[string][]bench.Result{}}
	cfg.Memo = memo
	// x's step is 2 values x 4 rounds; the kill comes inside y's.
	if _, err := Tune(context.Background(), &failing{n: 11}, cfg); err == nil {
		t.Fatal("the killed tuning did not fail")
	}
	resumed := &failing{n: 1 << 20}
	got, err := Tune(context.Background(), resumed, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ParamsLine(got.Params) != ParamsLine(want.Params) || got.Note != want.Note {
		t.Errorf("resumed: params %v, note %q; whole: %v, %q", got.Params, got.Note, want.Params, want.Note)
	}
	if memo.recalled != 1 || resumed.runs != whole.runs-8 {
		t.Errorf("resumed recalled %d steps and ran %d runs; want x's step recalled and %d runs", memo.recalled, resumed.runs, whole.runs-8)
	}
	again := &failing{n: 0}
	if _, err := Tune(context.Background(), again, cfg); err != nil || again.runs != 0 {
		t.Errorf("a finished tuning ran %d runs again (%v), want none", again.runs, err)
	}
}

// twoPatterns is a stack confirmed on bandwidth and all_reduce, whose
// x=b gains 1.5x on bandwidth and allreduceGain on all_reduce.
type twoPatterns struct {
	noMPI
	allreduceGain float64
}

func (*twoPatterns) ConfirmPatterns() []bench.Pattern {
	return []bench.Pattern{bench.Bandwidth, bench.AllReduce}
}
func (*twoPatterns) Space() []Param {
	return []Param{{Name: "x", Values: []string{"a", "b"}, Pattern: bench.Bandwidth, Sizes: []int{4096, 65536}}}
}
func (f *twoPatterns) Contender(_, label string, params map[string]string) mpistack.Contender {
	return measured(label, func(spec bench.Spec, _ int) float64 {
		switch {
		case params["x"] != "b" || spec.Pattern == bench.Latency:
			return 100
		case spec.Pattern == bench.AllReduce:
			return 100 / f.allreduceGain // µs: lower is better
		default:
			return 150
		}
	})
}

// A file confirmed on several patterns stands only if it loses on none:
// a gain on bandwidth does not buy a loss on all_reduce, and the note
// names the pattern it lost.
func TestConfirmOnEveryPattern(t *testing.T) {
	for _, tc := range []struct {
		gain float64
		kept bool
	}{{1.2, true}, {1.0, true}, {0.8, false}} {
		res, err := Tune(context.Background(), &twoPatterns{allreduceGain: tc.gain}, Config{Dir: t.TempDir(), Rounds: 5, ConfirmSizes: []int{4096, 65536}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Confirm) != 3 || res.Confirm[1].Param.Pattern != bench.AllReduce {
			t.Fatalf("all_reduce x%.1f: %d confirmations, want bandwidth, all_reduce and latency", tc.gain, len(res.Confirm))
		}
		if _, kept := res.Params["x"]; kept != tc.kept {
			t.Errorf("all_reduce x%.1f: params %v, note %q; want kept=%v", tc.gain, res.Params, res.Note, tc.kept)
		}
		if !tc.kept && !strings.Contains(res.Note, "all_reduce") {
			t.Errorf("all_reduce x%.1f: note %q does not name all_reduce", tc.gain, res.Note)
		}
		if tc.kept && !strings.Contains(res.Gains, "all_reduce") {
			t.Errorf("all_reduce x%.1f: gains %q do not name all_reduce", tc.gain, res.Gains)
		}
	}
}

// oneSize is a stack whose x=b is 1.5x the default's bandwidth at 4 KiB
// and level everywhere else.
type oneSize struct{ noMPI }

func (*oneSize) Space() []Param {
	return []Param{{Name: "x", Values: []string{"a", "b"}, Pattern: bench.Bandwidth, Sizes: []int{4096, 65536}}}
}
func (*oneSize) Contender(_, label string, params map[string]string) mpistack.Contender {
	return measured(label, func(spec bench.Spec, n int) float64 {
		if params["x"] == "b" && spec.Pattern == bench.Bandwidth && n == 4096 {
			return 150
		}
		return 100
	})
}

// A file that loses nowhere still stands only if it gains MinFileGain in
// geomean over the ladder it is confirmed on: one size 1.5x faster is
// 1.107x over four sizes, and 1.032x over thirteen (4 KiB-16 MiB), which
// is dropped with the figure named.
func TestConfirmWantsAFileToGain(t *testing.T) {
	for _, tc := range []struct {
		sizes []int
		kept  bool
	}{
		{[]int{4096, 8192, 16384, 32768}, true},
		{[]int{4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20}, false},
	} {
		res, err := Tune(context.Background(), &oneSize{}, Config{Dir: t.TempDir(), Rounds: 5, ConfirmSizes: tc.sizes})
		if err != nil {
			t.Fatal(err)
		}
		if _, kept := res.Params["x"]; kept != tc.kept {
			t.Errorf("%d sizes: params %v, note %q; want kept=%v", len(tc.sizes), res.Params, res.Note, tc.kept)
		}
		if !tc.kept && !strings.Contains(res.Note, "gained 1.032x") {
			t.Errorf("%d sizes: note %q does not name the geomean the file gained", len(tc.sizes), res.Note)
		}
	}
}
