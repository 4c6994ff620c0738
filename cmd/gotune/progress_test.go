package main

import (
	"strings"
	"testing"
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
