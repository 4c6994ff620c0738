package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
	"github.com/gotune/gotune/profile"
)

// A probe says on stderr which one runs (not with --quiet), and one cut
// short says so: the unsafe H5 hangs until its 10s deadline, far past the
// 300ms timeout.
func TestProbeSaysWhatRunsAndWhereItStopped(t *testing.T) {
	cases := []struct {
		args    []string
		code    int
		stderr  []string // in this order
		without string
	}{
		{[]string{"probe", "H5"}, 0, []string{"H5 safe: running (a rank without progress for 2s is a hang)\n"}, ""},
		{[]string{"probe", "H5", "-q"}, 0, nil, "running"},
		{[]string{"probe", "H5", "--unsafe", "--deadline", "10s", "--timeout", "300ms"}, 1,
			[]string{"H5 unsafe: running", "gotune: H5: interrupted while running its unsafe form, ", " in: timed out after 300ms (--timeout)\n"}, "probe failed"},
	}
	for _, c := range cases {
		out, e, code := run(t, c.args...)
		if code != c.code || strings.Count(out, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q; want exit %d and one verdict line", c.args, code, out, c.code)
		}
		rest := e
		for _, s := range c.stderr {
			i := strings.Index(rest, s)
			if i < 0 {
				t.Errorf("%v: stderr %q: no %q (in order)", c.args, e, s)
				break
			}
			rest = rest[i+len(s):]
		}
		if c.stderr == nil && e != "" || c.without != "" && strings.Contains(e, c.without) {
			t.Errorf("%v: stderr %q", c.args, e)
		}
	}
}

// bench --quiet writes nothing to stderr on a run that works.
func TestBenchQuiet(t *testing.T) {
	if _, e, code := run(t, "bench", "-q", "-s", "8,64", "--reps", "2", "--iters", "20", "--warmup", "1"); code != 0 || e != "" {
		t.Errorf("exit %d, stderr %q; want 0 and nothing", code, e)
	}
}

// fakeRuns makes anchors and stacks measure with contenders that need no
// MPI: gotune sm and a reference, each writing a line to the ranks'
// stderr it was given, as a rank's warning would.
func fakeRuns(t *testing.T) {
	t.Helper()
	fake := func(stderr io.Writer) []mpistack.Contender {
		mk := func(label string, ours bool) mpistack.Contender {
			return mpistack.Contender{Label: label, Ours: ours, Run: func(_ context.Context, s bench.Spec) (bench.Result, error) {
				fmt.Fprintf(stderr, "rank stderr of %s\n", label)
				var pts []bench.Point
				for _, size := range s.Sizes {
					pts = append(pts, bench.Summarize(size, s.Pattern.Unit(), []float64{float64(size)}, nil))
				}
				return bench.Result{Label: label, Spec: s, Points: pts}, nil
			}}
		}
		return []mpistack.Contender{mk("gotune sm", true), mk("fake mpi", false)}
	}
	oldAnchors, oldStacks := anchorContenders, newStackContenders
	t.Cleanup(func() { anchorContenders, newStackContenders = oldAnchors, oldStacks })
	anchorContenders = func(_ context.Context, _ string, stderr io.Writer) ([]mpistack.Contender, error) {
		return fake(stderr), nil
	}
	newStackContenders = func(_ context.Context, _ string, _ []string, _ *profile.Profile, _ int, stderr io.Writer) ([]mpistack.Contender, error) {
		return fake(stderr), nil
	}
}

// runsArgs are anchors' and stacks' arguments for 2 rounds of 2
// contenders: 4 runs of latency, then 4 of bw.
var runsArgs = [][]string{
	{"anchors", "--reps", "2", "--latency-sizes", "8", "--bw-sizes", "4K,8K", "--settle", "0"},
	{"stacks", "--reps", "2", "--latency-sizes", "8", "--bw-sizes", "4K,8K", "--settle", "0"},
}

// Without a terminal anchors and stacks say each pattern's planned runs
// and how many are done in plain lines; the ranks' stderr passes; the
// tables follow on stdout. --quiet leaves only the ranks' stderr.
func TestRunsProgressLines(t *testing.T) {
	fakeRuns(t)
	for _, args := range runsArgs {
		stdout, stderr, code := run(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		for _, want := range []string{"stage latency: 4 runs planned\n", "latency: 4/4 runs; 4 runs done\n",
			"stage bw: 4 runs planned; 4 runs done\n", "bw: 4/4 runs; 8 runs done\n", "rank stderr of fake mpi\n"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%v: stderr has no %q:\n%s", args, want, stderr)
			}
		}
		if strings.Contains(stderr, "\x1b[") || !strings.Contains(stdout, "fake mpi") {
			t.Errorf("%v: stderr %q (control sequences without a terminal?), stdout %q", args, stderr, stdout)
		}

		stdout, stderr, code = run(t, append(args, "-q")...)
		if code != 0 || !strings.Contains(stdout, "fake mpi") {
			t.Fatalf("%v -q: exit %d, stdout %q, stderr %s", args, code, stdout, stderr)
		}
		if kept := strings.ReplaceAll(strings.ReplaceAll(stderr, "rank stderr of gotune sm\n", ""), "rank stderr of fake mpi\n", ""); kept != "" {
			t.Errorf("%v -q: stderr has more than the ranks' lines: %q", args, kept)
		}
	}
}

// On a terminal (a pseudo-terminal, as a user's shows it) anchors and
// stacks draw a bar per pattern that ends at its planned runs, with the
// ranks' stderr above the bars; the tables print after the bars.
func TestRunsProgressBarOnTerminal(t *testing.T) {
	fakeRuns(t)
	for _, args := range runsArgs {
		var stdout bytes.Buffer
		got, code := onTerminal(t, func(tty *os.File) int { return Main(args, &stdout, tty) })
		if code != 0 {
			t.Fatalf("%v: exit %d:\n%s", args, code, got)
		}
		for _, want := range []string{"latency", "bw", "4/4 [", "8 runs done", "rank stderr of fake mpi"} {
			if !strings.Contains(got, want) {
				t.Errorf("%v: the terminal shows no %q:\n%q", args, want, got)
			}
		}
		if strings.Count(got, "4/4 [") < 2 || strings.Contains(got, "runs planned") {
			t.Errorf("%v: want both bars at 4/4 and no plain lines:\n%q", args, got)
		}
		if !strings.Contains(stdout.String(), "fake mpi") {
			t.Errorf("%v: stdout %q", args, stdout.String())
		}
	}
}

// onTerminal runs f with a sized pseudo-terminal as its stderr and returns
// what the terminal received, and f's result.
func onTerminal(t *testing.T, f func(tty *os.File) int) (string, int) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(tty, &pty.Winsize{Rows: 40, Cols: 140}); err != nil {
		t.Fatal(err)
	}
	screen := make(chan string)
	go func() {
		b, _ := io.ReadAll(ptmx) // until the tty side is closed
		screen <- string(b)
	}()
	code := f(tty)
	tty.Close()
	return <-screen, code
}

// On a terminal bench draws a bar of the sizes measured, under its lines,
// that reaches every size of a run; the results follow on stdout. Without
// a terminal there is no bar (its lines are tested in bench).
func TestBenchProgressBarOnTerminal(t *testing.T) {
	var stdout bytes.Buffer
	args := []string{"bench", "-t", "sm", "-p", "latency", "-s", "8,64", "--reps", "2", "--iters", "20", "--warmup", "1"}
	got, code := onTerminal(t, func(tty *os.File) int { return Main(args, &stdout, tty) })
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, got)
	}
	for _, want := range []string{"latency ", "2/2 [", "2 sizes done"} {
		if !strings.Contains(got, want) {
			t.Errorf("the terminal shows no %q:\n%q", want, got)
		}
	}
	if !strings.Contains(stdout.String(), "64") {
		t.Errorf("stdout %q", stdout.String())
	}
	if _, e, code := run(t, args...); code != 0 || strings.Contains(e, "\x1b[") || strings.Contains(e, "sizes done") {
		t.Errorf("without a terminal: exit %d, stderr %q", code, e)
	}
}

// On a terminal probe draws a bar of the probe it runs, under the line
// saying which, that ends at 1/1; the verdict follows on stdout.
func TestProbeProgressBarOnTerminal(t *testing.T) {
	var stdout bytes.Buffer
	got, code := onTerminal(t, func(tty *os.File) int { return Main([]string{"probe", "H5"}, &stdout, tty) })
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, got)
	}
	for _, want := range []string{"H5 safe: running", "H5 safe ", "1/1 [", "1 probe done"} {
		if !strings.Contains(got, want) {
			t.Errorf("the terminal shows no %q:\n%q", want, got)
		}
	}
	if !strings.HasPrefix(stdout.String(), "H5 safe: passed") {
		t.Errorf("stdout %q", stdout.String())
	}
}

// stacks --ranks N measures alltoall and then mbw_mr at N ranks, through
// the contenders it made for N; an odd N is refused, and ucx (one pair
// only) is left out with a note.
func TestStacksAtManyRanks(t *testing.T) {
	var specs []bench.Spec
	var made []int
	old := newStackContenders
	t.Cleanup(func() { newStackContenders = old })
	newStackContenders = func(_ context.Context, _ string, _ []string, _ *profile.Profile, ranks int, _ io.Writer) ([]mpistack.Contender, error) {
		made = append(made, ranks)
		mk := func(label string, ours bool) mpistack.Contender {
			return mpistack.Contender{Label: label, Ours: ours, Run: func(_ context.Context, s bench.Spec) (bench.Result, error) {
				if ours {
					specs = append(specs, s)
				}
				var pts []bench.Point
				for _, size := range s.Sizes {
					pts = append(pts, bench.Summarize(size, s.Pattern.Unit(), []float64{float64(size)}, nil))
				}
				return bench.Result{Label: label, Spec: s, Points: pts}, nil
			}}
		}
		return []mpistack.Contender{mk("gotune sm", true), mk("fake mpi", false)}, nil
	}
	stdout, stderr, code := run(t, "stacks", "--ranks", "4", "--reps", "1", "--alltoall-sizes", "1K", "--bw-sizes", "4K", "--settle", "0", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if len(made) != 1 || made[0] != 4 || len(specs) != 2 ||
		specs[0].Pattern != bench.AllToAll || specs[0].Ranks != 4 || !slices.Equal(specs[0].Sizes, []int{1024}) ||
		specs[1].Pattern != bench.MultiBandwidth || specs[1].Ranks != 4 || !slices.Equal(specs[1].Sizes, []int{4096}) {
		t.Fatalf("contenders made for %v ranks; specs run %+v", made, specs)
	}
	if !strings.Contains(stdout, "alltoall (us, lower is better)") || !strings.Contains(stdout, "mbw_mr (MB/s") {
		t.Errorf("stdout lacks the alltoall and mbw_mr tables:\n%s", stdout)
	}
	if _, stderr, code := run(t, "stacks", "--ranks", "3"); code == 0 || !strings.Contains(stderr, "even number") {
		t.Errorf("--ranks 3: exit %d, %s", code, stderr)
	}

	var note bytes.Buffer
	cs, err := stackContenders(t.Context(), t.TempDir(), []string{"ucx"}, nil, 4, &note)
	if err != nil || len(cs) != 1 || !strings.Contains(note.String(), "ucx left out") {
		t.Errorf("ucx at 4 ranks: %d contenders, %v, note %q", len(cs), err, note.String())
	}
}
