package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/launch"
)

// stepLine is the line a rank writes to announce a step.
func stepLine(rank, seq int, what string) string {
	b, _ := json.Marshal(step{Rank: rank, Seq: seq, What: what})
	return stepMarker + string(b) + "\n"
}

// The filter takes whole step lines out of the ranks' output, wherever they
// are in a write, and passes everything else on unchanged.
func TestStepFilter(t *testing.T) {
	cases := []struct {
		name   string
		writes []string
		pass   string
		now    string // the step current after the writes
	}{
		{"plain output", []string{"panic: boom\n", "goroutine 1\n"}, "panic: boom\ngoroutine 1\n", "starting"},
		{"one rank's step waits for the other's", []string{stepLine(0, 1, "starting transport sm")}, "", "starting"},
		{"steps amid output", []string{"a\n" + stepLine(0, 1, "x") + "b\n" + stepLine(1, 1, "x") + "c" + stepLine(0, 2, "y")}, "a\nb\nc", "x"},
		{"the rank behind", []string{stepLine(0, 1, "x"), stepLine(1, 1, "x"), stepLine(0, 2, "y")}, "", "x"},
		{"both ranks on", []string{stepLine(0, 1, "x"), stepLine(1, 2, "y"), stepLine(0, 2, "y")}, "", "y"},
		{"a step never goes back", []string{stepLine(0, 2, "y"), stepLine(1, 2, "y"), stepLine(0, 1, "x")}, "", "y"},
		{"a torn step passes", []string{strings.TrimSuffix(stepLine(0, 1, "x"), "\n")}, strings.TrimSuffix(stepLine(0, 1, "x"), "\n"), "starting"},
		{"a bad step is dropped", []string{stepMarker + "{\n"}, "", "starting"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := newTracker(context.Background(), nil, 2)
			tr.setParent("starting")
			var out bytes.Buffer
			f := tr.filter(&out)
			for _, w := range c.writes {
				if n, err := f.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if out.String() != c.pass {
				t.Errorf("passed %q, want %q", out.String(), c.pass)
			}
			if got := tr.where(); got != c.now {
				t.Errorf("where %q, want %q", got, c.now)
			}
		})
	}
}

// fakeClock drives a tracker's time: timers fire in advance, in order.
type fakeClock struct {
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at          time.Time
	f           func()
	done, fired bool
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) After(d time.Duration, f func()) func() bool {
	tm := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, tm)
	return func() bool { was := !tm.done; tm.done = true; return was }
}

// advance moves the clock by d, firing the timers due on the way.
func (c *fakeClock) advance(d time.Duration) {
	end := c.now.Add(d)
	for {
		var next *fakeTimer
		for _, tm := range c.timers {
			if !tm.done && !tm.at.After(end) && (next == nil || tm.at.Before(next.at)) {
				next = tm
			}
		}
		if next == nil {
			break
		}
		c.now, next.done, next.fired = next.at, true, true
		next.f()
	}
	c.now = end
}

// Progress lines: none before the ranks start nor in their first half
// second, then at most one a second, each naming the step current then;
// none after the run ends.
func TestProgressLines(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
	var out bytes.Buffer
	tr := newTracker(context.Background(), &out, 2)
	tr.now, tr.after = clk.Now, clk.After
	tr.began = clk.now
	f := tr.filter(&bytes.Buffer{})
	steps := func(s ...string) {
		for _, l := range s {
			f.Write([]byte(l))
		}
	}
	type event struct {
		after time.Duration // advance the clock first
		do    func()
		lines string // all lines written so far
	}
	events := []event{
		{0, func() { tr.setParent("checking the GPUs") }, ""},
		{2 * time.Second, func() { tr.setParent("starting rank processes") }, ""},
		{100 * time.Millisecond, tr.ranksStarted, ""},
		{100 * time.Millisecond, func() { steps(stepLine(0, 1, "opening the GPUs"), stepLine(1, 1, "opening the GPUs")) }, ""},
		{200 * time.Millisecond, func() {}, ""},
		{200 * time.Millisecond, func() {}, "[0:03] opening the GPUs\n"}, // started + 0.5s
		{100 * time.Millisecond, func() { steps(stepLine(0, 2, "allocating"), stepLine(1, 2, "allocating")) }, "[0:03] opening the GPUs\n"},
		{100 * time.Millisecond, func() { steps(stepLine(0, 3, "measuring bw at 8"), stepLine(1, 3, "measuring bw at 8")) }, "[0:03] opening the GPUs\n"},
		{100 * time.Millisecond, func() { steps(stepLine(1, 4, "measuring bw at 1M")) }, "[0:03] opening the GPUs\n"},
		// a second after the last line: the step then, rank 0's (behind)
		{700 * time.Millisecond, func() {}, "[0:03] opening the GPUs\n[0:04] measuring bw at 8\n"},
		{5 * time.Second, func() {}, "[0:03] opening the GPUs\n[0:04] measuring bw at 8\n"},
		// a step long after the last line is written at once
		{0, func() { steps(stepLine(0, 4, "measuring bw at 1M")) }, "[0:03] opening the GPUs\n[0:04] measuring bw at 8\n[0:09] measuring bw at 1M\n"},
		{0, tr.finish, "[0:03] opening the GPUs\n[0:04] measuring bw at 8\n[0:09] measuring bw at 1M\n"},
		{5 * time.Second, func() { steps(stepLine(0, 5, "closing"), stepLine(1, 5, "closing")) }, "[0:03] opening the GPUs\n[0:04] measuring bw at 8\n[0:09] measuring bw at 1M\n"},
	}
	for i, e := range events {
		clk.advance(e.after)
		e.do()
		clk.advance(0)
		if out.String() != e.lines {
			t.Fatalf("after event %d: lines\n%s\nwant\n%s", i, out.String(), e.lines)
		}
	}
	if got, want := tr.where(), "closing (rank processes started 12s ago)"; got != want {
		t.Errorf("where %q, want %q", got, want)
	}
}

// An interrupted run says which step it was in; the cause stays in the
// chain.
func TestRunSaysWhereItWasInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const at = "measuring latency at 64"
	var seen []string
	cancelAt := func(o *runOptions) {
		o.onChange = func(what string) {
			seen = append(seen, what)
			if what == at {
				cancel()
			}
		}
	}
	spec := Spec{Transport: "sm", Pattern: Latency, Sizes: []int{8, 64}, Reps: 3, Iters: 20000, Warmup: 1, Settle: 8}
	_, err := Run(ctx, spec, 0, launch.Hooks{Stderr: &strings.Builder{}}, cancelAt)
	if err == nil || !strings.HasPrefix(err.Error(), "interrupted while "+at+" (rank processes started ") || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want an interruption at %q that wraps context.Canceled", err, at)
	}
	want := []string{"starting rank processes", "starting transport sm", "allocating message buffers (largest 64)",
		"running the unreported settling pass of latency at 8", "measuring latency at 8", at}
	var steps []string
	for _, s := range seen {
		if len(steps) == 0 || steps[len(steps)-1] != s {
			steps = append(steps, s)
		}
	}
	if strings.Join(steps, "|") != strings.Join(want, "|") {
		t.Errorf("steps %q, want %q", steps, want)
	}
}

// A stall's stacks come without the ranks' step lines.
func TestStallStacksWithoutSteps(t *testing.T) {
	spec := Spec{Transport: "sm-hang", Pattern: Latency, Sizes: []int{8}, Reps: 1000, Iters: 10, Warmup: 1}
	_, err := Run(context.Background(), spec, 500*time.Millisecond, launch.Hooks{Stderr: &strings.Builder{}})
	var se *launch.StallError
	if !errors.As(err, &se) || len(se.Stacks) == 0 {
		t.Fatalf("got %v, want a stall with stacks", err)
	}
	for r, s := range se.Stacks {
		if strings.Contains(s, stepMarker) {
			t.Errorf("rank %d's stacks hold step lines:\n%s", r, s)
		}
	}
}

// meterLog records what a run tells its meter.
type meterLog []string

func (l *meterLog) Plan(stage string, n int) { *l = append(*l, fmt.Sprintf("plan %s %d", stage, n)) }
func (l *meterLog) Step(stage, line string)  { *l = append(*l, stage+": "+line) }
func pointLine(rank, seq, point int) string {
	b, _ := json.Marshal(step{Rank: rank, Seq: seq, What: "measuring", Point: point})
	return stepMarker + string(b) + "\n"
}

// The meter counts the sizes before the one the rank that is behind
// measures: none until both ranks measure, more than one at once when a
// step line was lost, and the rest when the run succeeds.
func TestTrackerCountsSizesMeasured(t *testing.T) {
	var m meterLog
	tr := newTracker(context.Background(), nil, 2)
	tr.meter = &m
	tr.plan(Spec{Pattern: Bandwidth, Sizes: []int{8, 1 << 10, 1 << 20, 4 << 20}})
	f := tr.filter(&bytes.Buffer{})
	for _, c := range []struct {
		line string
		want []string // heard so far
	}{
		{stepLine(0, 1, "allocating"), []string{"plan bw 4"}},
		{pointLine(0, 2, 1), []string{"plan bw 4"}},
		{pointLine(0, 3, 2), []string{"plan bw 4"}}, // rank 1 has measured nothing
		{pointLine(1, 2, 1), []string{"plan bw 4"}},
		{pointLine(1, 3, 2), []string{"plan bw 4", "bw: bw at 8"}},
		{pointLine(0, 5, 4), []string{"plan bw 4", "bw: bw at 8"}}, // rank 0's point 3 lost
		{pointLine(1, 5, 4), []string{"plan bw 4", "bw: bw at 8", "bw: bw at 1K", "bw: bw at 1M"}},
		{stepLine(1, 6, "closing transport sm"), []string{"plan bw 4", "bw: bw at 8", "bw: bw at 1K", "bw: bw at 1M"}},
	} {
		f.Write([]byte(c.line))
		if !slices.Equal(m, c.want) {
			t.Fatalf("after %q: meter heard %q, want %q", c.line, m, c.want)
		}
	}
	tr.measuredAll(4)
	tr.measuredAll(4) // no more
	if want := []string{"plan bw 4", "bw: bw at 8", "bw: bw at 1K", "bw: bw at 1M", "bw: bw at 4M"}; !slices.Equal(m, want) {
		t.Errorf("after the run: meter heard %q, want %q", m, want)
	}
}

// A rank announces the size it measures with its place in the ladder.
func TestStepperAnnouncesThePoint(t *testing.T) {
	var b bytes.Buffer
	st := &stepper{w: &b, rank: 1}
	st.start("allocating")
	st.measure(Spec{Pattern: Latency, Sizes: []int{8, 64}}, 1)
	var got []step
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		var s step
		if err := json.Unmarshal([]byte(strings.TrimPrefix(l, stepMarker)), &s); err != nil {
			t.Fatalf("step line %q: %v", l, err)
		}
		got = append(got, s)
	}
	want := []step{{Rank: 1, Seq: 1, What: "allocating"}, {Rank: 1, Seq: 2, What: "measuring latency at 64", Point: 2}}
	if !slices.Equal(got, want) {
		t.Errorf("steps %+v, want %+v", got, want)
	}
}
