package probe

import (
	"testing"
	"time"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// H3's safe form passes at every depth; the leak hangs after as many
// iterations as the FIFO is deep, and the verdict says so; a configuration
// that carries the leak is caught through RunWith too.
func TestH3SafePassesLeakHangsByDepth(t *testing.T) {
	p, ctx := passesSafe(t, "H3", time.Second)
	for name, v := range map[string]Verdict{
		"unsafe":              p.Run(ctx, true, 500*time.Millisecond),
		"leaky configuration": RunWith(ctx, p, false, 500*time.Millisecond, transports.Options{sm.KeyPersist: "leak"}),
	} {
		caught(t, name, v, "hang after 1 iteration(s) at depth 1", "hang after 2 iteration(s) at depth 2", "grows with the FIFO depth")
		stacksShow(t, name, v, "(*Endpoint).waitOne")
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
