package probe

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/launch"

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

// At a node's rank count (WithRanks) H8 runs again with three senders to
// the rank that computes: the progress thread serves them all and the
// detail says so; with polling progress every sender stalls.
func TestH8AtManyRanks(t *testing.T) {
	const deadline = 500 * time.Millisecond
	p, err := Lookup("H8")
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithRanks(t.Context(), 4)
	v := p.Run(ctx, false, deadline)
	if v.Outcome != Passed || !strings.Contains(v.Detail, "at 4 ranks those of 3 senders at once") ||
		!strings.Contains(v.Detail, "push at 4 ranks") || !strings.Contains(v.Detail, "split at 4 ranks") {
		t.Fatalf("safe H8 at 4 ranks: %s: %s", v.Outcome, v.Detail)
	}
	// Polling, in each copy mode (the probe stops at the first it catches):
	// every sender stalls, split's after its first rendezvous pulled whole.
	for _, mode := range []string{"pull", "split"} {
		o, pipe, rndv, err := h8Setup(h8Geometry, mode, true)
		if err != nil {
			t.Fatal(err)
		}
		d, err := transports.Lookup("cma")
		if err != nil {
			t.Fatal(err)
		}
		seg, err := d.SharedBytes(4, o)
		if err != nil {
			t.Fatal(err)
		}
		params, _ := json.Marshal(h8Params{Options: o, Compute: 3 * deadline, Rndv: rndv, Pipeline: pipe})
		_, err = launch.Run(t.Context(), launch.Job{Kind: h8Kind, Size: 4, SegmentBytes: seg, Params: params, Stall: deadline}, launch.Hooks{})
		var se *launch.StallError
		if !errors.As(err, &se) || len(se.Ranks) != 3 || slices.Contains(se.Ranks, 3) {
			t.Fatalf("%s, polling progress, 3 senders to 1 computing rank: got %v, want the 3 senders stalled", mode, err)
		}
	}
}
