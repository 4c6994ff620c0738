package probe

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// lookupProbe finds probe id and a context bounding its runs to within,
// cancelled when the test ends.
func lookupProbe(t *testing.T, id string, within time.Duration) (*Probe, context.Context) {
	t.Helper()
	p, err := Lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	return p, ctx
}

// passesSafe looks probe id up and fails the test unless its safe form,
// run with deadline, passes with a detail that says each of says. Its
// other runs get the context returned (2 minutes in all).
func passesSafe(t *testing.T, id string, deadline time.Duration, says ...string) (*Probe, context.Context) {
	t.Helper()
	p, ctx := lookupProbe(t, id, 2*time.Minute)
	v := p.Run(ctx, false, deadline)
	if v.Outcome != Passed {
		t.Fatalf("safe %s: %s", p.ID, v.Line())
	}
	verdictSays(t, "safe "+p.ID, v, says...)
	return p, ctx
}

// caught fails the test unless v, the verdict of the run called name,
// detected the hazard with a detail that says each of says.
func caught(t *testing.T, name string, v Verdict, says ...string) {
	t.Helper()
	if v.Outcome != HazardDetected {
		t.Fatalf("%s: %s", name, v.Line())
	}
	verdictSays(t, name, v, says...)
}

func verdictSays(t *testing.T, name string, v Verdict, says ...string) {
	t.Helper()
	for _, want := range says {
		if !strings.Contains(v.Detail, want) {
			t.Fatalf("%s: verdict %q does not say %q", name, v.Detail, want)
		}
	}
}

// stacksShow fails the test unless v has stacks and every rank's show
// each of frames.
func stacksShow(t *testing.T, name string, v Verdict, frames ...string) {
	t.Helper()
	if len(v.Stacks) == 0 {
		t.Fatalf("%s: no stacks", name)
	}
	for r, s := range v.Stacks {
		for _, frame := range frames {
			if !strings.Contains(s, frame) {
				t.Errorf("%s: rank %d's stacks lack %s:\n%s", name, r, frame, s)
			}
		}
	}
}

func TestMain(m *testing.M) {
	launch.MaybeRunRank()
	os.Exit(m.Run())
}

// The safe form passes; the unsafe form is caught by the watchdog (not by
// an outer timeout), with stacks from the deadlocked ranks.
func TestH5SafePassesUnsafeIsCaught(t *testing.T) {
	p, ctx := passesSafe(t, "h5", time.Second)
	v := p.Run(ctx, true, 500*time.Millisecond)
	caught(t, "unsafe H5", v, "hang")
	stacksShow(t, "unsafe H5", v, "(*Endpoint).waitOne")
}

// The flood on its own: three ranks, unsafe, deadlock too.
func TestH5FloodUnsafeDeadlocks(t *testing.T) {
	p, _ := sm.ParseParams(h5Options(true, nil))
	params, _ := json.Marshal(h5Params{Unsafe: true, Messages: 500})
	_, err := launch.Run(context.Background(), launch.Job{Kind: h5Kind, Size: 3, SegmentBytes: p.SegmentBytes(3),
		Params: params, Stall: 500 * time.Millisecond}, launch.Hooks{})
	var se *launch.StallError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a stall", err)
	}
}

// At a node's rank count (WithRanks) H5 also bursts every rank to every
// other through rings each shared by all of a rank's peers: the safe form
// passes and says so, the unsafe twin deadlocks there too.
func TestH5AtManyRanks(t *testing.T) {
	p, err := Lookup("H5")
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithRanks(t.Context(), 4)
	v := p.RunOptions(ctx, false, 5*time.Second, nil)
	if v.Outcome != Passed || !strings.Contains(v.Detail, "head-to-head, 3-rank flood and 4 ranks all to all") {
		t.Fatalf("safe H5 at 4 ranks: %s: %s", v.Outcome, v.Detail)
	}
	sp, _ := sm.ParseParams(h5Options(true, nil))
	params, _ := json.Marshal(h5Params{Unsafe: true, Messages: 500, AllPairs: true})
	_, err = launch.Run(t.Context(), launch.Job{Kind: h5Kind, Size: 4, SegmentBytes: sp.SegmentBytes(4),
		Params: params, Stall: 500 * time.Millisecond}, launch.Hooks{})
	var se *launch.StallError
	if !errors.As(err, &se) {
		t.Fatalf("unsafe all-to-all burst at 4 ranks: got %v, want a stall", err)
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want Outcome
	}{
		{nil, Passed},
		{&launch.StallError{Kind: "x", Ranks: []int{1}}, HazardDetected},
		{errors.New("rank 1 of bench: bw size 8 iteration 0: payload validation failed: byte 3"), HazardDetected},
		{errors.New("launch: bootstrap socket: permission denied"), ProbeFailed},
	}
	for _, c := range cases {
		if got, _, _ := classify(c.err); got != c.want {
			t.Errorf("%v: %v, want %v", c.err, got, c.want)
		}
	}
	if _, err := Lookup("H99"); err == nil || !strings.Contains(err.Error(), "H5") {
		t.Errorf("unknown probe: %v", err)
	}
}

// A registered probe's verdicts carry its ID and variant whichever way it
// runs; without a Run of its own it runs RunOptions on nil options.
func TestStampedLabelsVerdicts(t *testing.T) {
	var got []transports.Options
	p := stamped(&Probe{ID: "HX", RunOptions: func(_ context.Context, _ bool, _ time.Duration, o transports.Options) Verdict {
		got = append(got, o)
		return Verdict{Detail: "ran"}
	}})
	for _, v := range []Verdict{p.Run(context.Background(), true, time.Second),
		RunWith(context.Background(), p, false, time.Second, transports.Options{"k": "v"})} {
		if v.ID != "HX" || v.Detail != "ran" {
			t.Errorf("verdict %+v: want ID HX, detail ran", v)
		}
	}
	if v := p.Run(context.Background(), true, time.Second); !v.Unsafe {
		t.Errorf("unsafe run: verdict %+v is not marked unsafe", v)
	}
	if len(got) != 3 || got[0] != nil || got[1]["k"] != "v" {
		t.Errorf("RunOptions got %v, want nil, then the options", got)
	}
}
