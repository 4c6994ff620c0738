package launch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func init() {
	// Rank 1 stops beating, inside a function the stacks must name; rank 0
	// keeps beating, so the watchdog must pick rank 1.
	Register("stall-rank1", func(r *Rank) (any, error) {
		if r.ID == 1 {
			return nil, stuckForever(r)
		}
		for {
			r.Beat()
		}
	})
	// Both ranks beat while busy for three stall deadlines.
	Register("busy", func(r *Rank) (any, error) {
		var stall time.Duration
		if err := r.Params(&stall); err != nil {
			return nil, err
		}
		for start := time.Now(); time.Since(start) < 3*stall; {
			r.Beat()
		}
		return nil, nil
	})
}

//go:noinline
func stuckForever(r *Rank) error {
	var m message
	return r.dec.Decode(&m) // the launcher never sends anything more
}

func TestWatchdogCatchesStallWithStacks(t *testing.T) {
	var pids []int
	_, err := Run(context.Background(), Job{Kind: "stall-rank1", Size: 2, Stall: 300 * time.Millisecond},
		Hooks{Started: func(p []int) { pids = p }, Stderr: &strings.Builder{}})
	var se *StallError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a StallError", err)
	}
	if len(se.Ranks) != 1 || se.Ranks[0] != 1 || se.Quiet < 300*time.Millisecond {
		t.Errorf("stall of ranks %v after %v, want rank 1 alone after at least 300ms", se.Ranks, se.Quiet)
	}
	if s := se.Stacks[1]; !strings.Contains(s, "goroutine") || !strings.Contains(s, "stuckForever") {
		t.Errorf("stacks do not show where rank 1 is stuck:\n%s", s)
	}
	assertGone(t, pids)
}

func TestWatchdogSparesRanksThatBeat(t *testing.T) {
	stall := 100 * time.Millisecond
	params, _ := jsonRaw(stall)
	if _, err := Run(context.Background(), Job{Kind: "busy", Size: 2, Stall: stall, Params: params}, Hooks{}); err != nil {
		t.Fatal(err)
	}
}

// Time the launcher was stopped does not count against the ranks; a late
// tick of a loaded machine is not taken for such a pause.
func TestWatchdogForgivesItsOwnAbsence(t *testing.T) {
	t0 := time.Unix(1000, 0)
	period := 375 * time.Millisecond // a 3 s stall's
	for _, tc := range []struct {
		name string
		gap  time.Duration
		want time.Duration // how far moved[r] moves on
	}{
		{"on time", period, 0},
		{"a late tick", 900 * time.Millisecond, 0},
		{"stopped for 6 s", 6 * time.Second, 6*time.Second - period},
	} {
		moved := []time.Time{t0, t0.Add(time.Second)}
		prev := t0.Add(2 * time.Second)
		forgiveAbsence(moved, prev, prev.Add(tc.gap), period)
		if moved[0] != t0.Add(tc.want) || moved[1] != t0.Add(time.Second+tc.want) {
			t.Errorf("%s: moved %v, want each %v later", tc.name, []time.Time{moved[0], moved[1]}, tc.want)
		}
	}
}
