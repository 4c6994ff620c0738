package probe

import (
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// H3's safe form passes at every depth; the leak hangs after as many
// iterations as the FIFO is deep, and the verdict says so; a configuration
// that carries the leak is caught through RunWith too.
func TestH3SafePassesLeakHangsByDepth(t *testing.T) {
	p, ctx := lookupProbe(t, "H3", 2*time.Minute)
	if v := p.Run(ctx, false, time.Second); v.Outcome != Passed {
		t.Fatalf("safe H3: %s", v.Line())
	}
	cases := []struct {
		name string
		v    Verdict
	}{
		{"unsafe", p.Run(ctx, true, 500*time.Millisecond)},
		{"leaky configuration", RunWith(ctx, p, false, 500*time.Millisecond, transports.Options{sm.KeyPersist: "leak"})},
	}
	for _, c := range cases {
		if c.v.Outcome != HazardDetected {
			t.Fatalf("%s: %s", c.name, c.v.Line())
		}
		for _, want := range []string{"hang after 1 iteration(s) at depth 1", "hang after 2 iteration(s) at depth 2", "grows with the FIFO depth"} {
			if !strings.Contains(c.v.Detail, want) {
				t.Errorf("%s: verdict %q does not say %q", c.name, c.v.Detail, want)
			}
		}
		for r, s := range c.v.Stacks {
			if !strings.Contains(s, "(*Endpoint).waitOne") {
				t.Errorf("%s: rank %d's stacks do not show it waiting in the engine:\n%s", c.name, r, s)
			}
		}
	}
}

func TestH3IterationsFromStacks(t *testing.T) {
	cases := []struct {
		stacks map[int]string
		want   int
	}{
		{map[int]string{0: "h3: 1 iterations done\nh3: 2 iterations done\nSIGQUIT ...", 1: "h3: 1 iterations done\n"}, 1},
		{map[int]string{0: "SIGQUIT: no line"}, 0},
		{map[int]string{0: "h3: 12 iterations done\n", 1: "h3: 12 iterations done\n"}, 12},
	}
	for _, c := range cases {
		if got := h3Done(c.stacks); got != c.want {
			t.Errorf("%v: %d, want %d", c.stacks, got, c.want)
		}
	}
	if !increasing([]int{1, 2, 4}) || increasing([]int{2, 2}) || increasing([]int{3}) {
		t.Error("increasing")
	}
}
