package sweep

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/tuner/stack"
	"github.com/gotune/gotune/tuner/store"
)

// fakeStack is an MPI stack without MPI: btl_fake_eager 8192 is 1.5x the
// default's bandwidth at every size, btl_fake_fbox 2 is no better, and a
// hang value fails the hazard check.
type fakeStack struct {
	hang string // the eager value whose check hangs ("": none)
	// killAfter > 0 fails every run after that many (a sweep killed while
	// it tunes the stack); runs counts them.
	killAfter, runs int
}

func (*fakeStack) Name() string                          { return "openmpi" }
func (*fakeStack) Prepare(context.Context, string) error { return nil }
func (*fakeStack) Space() []stack.Param {
	sizes := []int{4096, 65536}
	return []stack.Param{
		{Name: "btl_fake_eager", Values: []string{"4096", "8192"}, Pattern: bench.Bandwidth, Sizes: sizes},
		{Name: "btl_fake_fbox", Values: []string{"1", "2"}, Pattern: bench.Bandwidth, Sizes: sizes},
	}
}

func (f *fakeStack) Contender(_, label string, params map[string]string) mpistack.Contender {
	return mpistack.Contender{Label: label, Run: func(_ context.Context, spec bench.Spec) (bench.Result, error) {
		if f.runs++; f.killAfter > 0 && f.runs > f.killAfter {
			return bench.Result{}, fmt.Errorf("killed")
		}
		v := 100.0
		if params["btl_fake_eager"] == "8192" && spec.Pattern != bench.Latency {
			v = 150 // a bandwidth gain; latency the same
		}
		res := bench.Result{Label: label, Spec: spec}
		res.Provenance.Libraries = map[string]string{"openmpi": "9.9.9"}
		for i, n := range spec.Sizes {
			res.Points = append(res.Points, bench.Point{Size: n, Median: v + float64(i%2), Samples: []float64{v + float64(i%2)}})
		}
		return res, nil
	}}
}

func (f *fakeStack) Check(_ context.Context, _ string, params map[string]string) error {
	if f.hang != "" && params["btl_fake_eager"] == f.hang {
		return fmt.Errorf("h2h at 8: %w", mpistack.ErrHang)
	}
	return nil
}

// withFakeStack makes "openmpi" the fake for the test's duration.
func withFakeStack(t *testing.T, f *fakeStack) {
	saved := adapters["openmpi"]
	adapters["openmpi"] = func() stack.Adapter { return f }
	t.Cleanup(func() { adapters["openmpi"] = saved })
}

// A sweep with a stack records the decision and its evidence in the
// profile, writes the native file, and replays the stack on tune without
// measuring it again; a value that fails the hazards is dropped and
// quarantined.
func TestSweepTunesAStack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real rank processes")
	}
	for _, tc := range []struct {
		name   string
		hang   string
		params map[string]string
	}{
		{"passes", "", map[string]string{"btl_fake_eager": "8192"}},
		{"hangs", "8192", map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withFakeStack(t, &fakeStack{hang: tc.hang})
			p := tinyPlan()
			p.Stacks, p.StackRounds = []string{"openmpi"}, 5
			p.VerifySizes = SizeList{}
			out := t.TempDir()
			res, err := Run(context.Background(), Config{Plan: p, Out: out})
			if err != nil {
				t.Fatal(err)
			}
			prof, err := profile.Load(res.ProfilePath)
			if err != nil {
				t.Fatal(err)
			}
			st, ok := prof.Stacks["openmpi"]
			if !ok || st.Version != "9.9.9" || fmt.Sprint(st.Params) != fmt.Sprint(tc.params) {
				t.Fatalf("stacks section %+v, want version 9.9.9 and params %v", prof.Stacks, tc.params)
			}
			if _, ok := st.Params["btl_fake_eager"]; ok && !strings.Contains(st.Evidence["btl_fake_eager"], "1.50x over the default 4096") {
				t.Errorf("evidence %q", st.Evidence["btl_fake_eager"])
			}
			file, err := os.ReadFile(filepath.Join(res.Dir, NativeDir, "openmpi-mca-params.conf"))
			if err != nil {
				t.Fatal(err)
			}
			if has := strings.Contains(string(file), "\nbtl_fake_eager = 8192\n"); has != (len(tc.params) > 0) {
				t.Errorf("native file sets btl_fake_eager: %v, want %v:\n%s", has, len(tc.params) > 0, file)
			}
			summary, _ := os.ReadFile(filepath.Join(res.Dir, SummaryFile))
			if !strings.Contains(string(summary), "## stack openmpi 9.9.9") {
				t.Errorf("summary lacks the stack:\n%s", summary)
			}
			// The confirmation's * marks the file that stands (the tuned
			// one here, since the values passed the confirmation).
			if !strings.Contains(string(summary), "*tuned") || strings.Contains(string(summary), "*defaults") {
				t.Errorf("the confirmation lines do not mark the tuned file as standing:\n%s", summary)
			}
			q, err := store.Open(filepath.Join(filepath.Dir(res.Dir), QuarantineFile))
			if err != nil {
				t.Fatal(err)
			}
			quarantined := q.Has("verdict:stack-openmpi:" + digest(map[string]string{"btl_fake_eager": "8192"}))
			q.Close()
			if quarantined != (tc.hang != "") {
				t.Errorf("quarantined %v, want %v", quarantined, tc.hang != "")
			}

			// tune replays the stored stack outcome: same hash, nothing measured.
			withFakeStack(t, &fakeStack{hang: "4096"}) // a fake that would decide otherwise, were it asked
			tuned, err := Tune(context.Background(), res.Dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			again, err := profile.Load(tuned.ProfilePath)
			if err != nil || again.Hash != prof.Hash {
				t.Fatalf("tune: %v, hash %s then %s", err, prof.Hash, again.Hash)
			}
		})
	}
}

// A sweep killed while it tunes a stack resumes at the step it was in:
// the parameters it had weighed are not measured again, and the file is
// the one a whole run writes.
func TestSweepResumesAStackAtItsStep(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real rank processes")
	}
	p := tinyPlan()
	p.Stacks, p.StackRounds = []string{"openmpi"}, 4
	p.VerifySizes = SizeList{}
	whole := &fakeStack{}
	withFakeStack(t, whole)
	want, err := Run(context.Background(), Config{Plan: p, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// The first parameter's step is 2 values x 4 rounds; the kill comes
	// in the second's.
	withFakeStack(t, &fakeStack{killAfter: 11})
	killed, err := Run(context.Background(), Config{Plan: p, Out: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the killed sweep: %v", err)
	}
	resumed := &fakeStack{}
	withFakeStack(t, resumed)
	got, err := Run(context.Background(), Config{Resume: killed.Dir})
	if err != nil {
		t.Fatal(err)
	}
	if resumed.runs != whole.runs-8 {
		t.Errorf("the resumed sweep ran the stack %d times, want %d (a whole tuning's %d less the first step's 8)", resumed.runs, whole.runs-8, whole.runs)
	}
	a, errA := profile.Load(want.ProfilePath)
	b, errB := profile.Load(got.ProfilePath)
	if errA != nil || errB != nil || fmt.Sprint(a.Stacks) != fmt.Sprint(b.Stacks) {
		t.Errorf("stacks: whole %+v (%v), resumed %+v (%v)", a.Stacks, errA, b.Stacks, errB)
	}
}
