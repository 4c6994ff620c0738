package probe

import (
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
	const deadline = 500 * time.Millisecond
	p, ctx := passesSafe(t, "H8", deadline)
	for name, v := range map[string]Verdict{
		"unsafe":                p.Run(ctx, true, deadline),
		"polling configuration": RunWith(ctx, p, false, deadline, transports.Options{sm.KeyProgress: "poll"}),
	} {
		caught(t, name, v, "hang")
		if _, ok := v.Stacks[0]; !ok || len(v.Stacks) != 1 {
			t.Errorf("%s: stalled ranks %v, want the sender (0) only: the receiver computes and beats", name, keys(v.Stacks))
		}
		stacksShow(t, name, v, "(*Endpoint).waitOne")
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
