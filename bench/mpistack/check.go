package mpistack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/sys"
)

// CheckOptions bound the hazard runs of Check; zero values take the
// defaults named.
type CheckOptions struct {
	// FloodRanks is the flood's process count: rank 0 and FloodRanks-1
	// senders (0: 3, the fewest that make it many-to-one).
	FloodRanks int
	// Window is the messages in flight per rank and iteration (0:
	// bench.DefaultWindow, OSU's 64).
	Window int
	// Iters and Warmup per size (0: 20 and 2): enough iterations to cycle
	// a FIFO many times, few enough to stay seconds long.
	Iters, Warmup int
	// Timeout bounds each pattern's run (0: one minute); a run past it, or
	// past ctx's deadline, is ErrHang.
	Timeout time.Duration
}

// Check runs the stack hazards (issue 28 item 3) through s with a binary
// from Build, at every one of sizes, payloads validated: HeadToHead with 2
// ranks, then Flood with opt.FloodRanks. It returns nil when both complete
// intact, and otherwise an error naming the stack and pattern that matches
// ErrHang (the run passed its deadline and was killed), ErrCorrupt (a rank
// received a bad byte; the error names it) or ErrCrash (the launcher or a
// rank failed otherwise, with their output). A stack that is not installed
// is sys.ErrNotSupported, and a cancelled ctx its own error: neither says
// anything about the configuration. The tuner calls it before emitting a
// tuned file (in s.Env) and quarantines a file that fails.
func Check(ctx context.Context, s Stack, binary string, sizes []int, opt CheckOptions) error {
	timeout := cmp.Or(opt.Timeout, time.Minute)
	spec := bench.Spec{
		Sizes:    sizes,
		Reps:     1,
		Iters:    cmp.Or(opt.Iters, 20),
		Warmup:   cmp.Or(opt.Warmup, 2),
		Window:   opt.Window,
		Validate: true,
	}
	if len(sizes) == 0 {
		return fmt.Errorf("check %s: no message sizes", s.Name)
	}
	for _, run := range []struct {
		pattern bench.Pattern
		ranks   int
	}{{HeadToHead, 2}, {Flood, cmp.Or(opt.FloodRanks, 3)}} {
		st := s
		st.Ranks = run.ranks
		spec.Pattern = run.pattern
		if _, err := resolve(st, spec); err != nil { // a bad request says nothing about the stack
			return fmt.Errorf("check %s: %w", s.Name, err)
		}
		if err := checkOne(ctx, st, binary, spec, timeout); err != nil {
			return fmt.Errorf("check %s: %s at %v with %d ranks: %w", s.Name, run.pattern, sizes, run.ranks, err)
		}
	}
	return nil
}

// checkOne runs one hazard pattern under its own deadline and classifies a
// failure.
func checkOne(ctx context.Context, s Stack, binary string, spec bench.Spec, timeout time.Duration) error {
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := Run(runCtx, s, binary, spec)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrHang), errors.Is(err, ErrCorrupt), errors.Is(err, sys.ErrNotSupported):
		return err
	case ctx.Err() != nil: // the caller gave up: no verdict
		return err
	default:
		return fmt.Errorf("%w: %w", ErrCrash, err)
	}
}
