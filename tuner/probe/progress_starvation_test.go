package probe

import (
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// H8: the progress thread lets the sender finish while the receiver
// computes; polling progress leaves it waiting, and the watchdog names the
// sender, waiting in the engine. A configuration without the progress
// thread is caught through RunWith (the sweep then switches to it).
func TestH8ThreadPassesPollingStarves(t *testing.T) {
	p, ctx := lookupProbe(t, "H8", 2*time.Minute)
	const deadline = 500 * time.Millisecond
	if v := p.Run(ctx, false, deadline); v.Outcome != Passed {
		t.Fatalf("safe H8: %s", v.Line())
	}
	cases := []struct {
		name string
		v    Verdict
	}{
		{"unsafe", p.Run(ctx, true, deadline)},
		{"polling configuration", RunWith(ctx, p, false, deadline, transports.Options{sm.KeyProgress: "poll"})},
	}
	for _, c := range cases {
		if c.v.Outcome != HazardDetected || !strings.Contains(c.v.Detail, "hang") {
			t.Fatalf("%s: %s", c.name, c.v.Line())
		}
		if _, ok := c.v.Stacks[0]; !ok || len(c.v.Stacks) != 1 {
			t.Errorf("%s: stalled ranks %v, want the sender (0) only: the receiver computes and beats", c.name, keys(c.v.Stacks))
		}
		if !strings.Contains(c.v.Stacks[0], "(*Endpoint).waitOne") {
			t.Errorf("%s: the sender's stacks do not show it waiting in the engine:\n%s", c.name, c.v.Stacks[0])
		}
	}
	if v := RunWith(ctx, p, false, deadline, transports.Options{sm.KeyProgress: "thread", sm.KeyFrags: "4", sm.KeyFrag: "8K"}); v.Outcome != Passed {
		t.Errorf("configuration with the progress thread: %s", v.Line())
	}
}

func keys(m map[int]string) []int {
	var k []int
	for r := range m {
		k = append(k, r)
	}
	return k
}
