package sweep

import (
	"errors"
	"fmt"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/transports/hostmem"
)

// runTogether measures the trials of one round side by side
// in one pair of ranks (bench.Spec.Alternates): each repetition of a size
// runs once through every candidate, in turn. Compared in pairs of their
// own, two candidates also differ by the streaming mode each fresh pair
// keeps for its life, which on some hosts is 1.4x (docs/performance.md);
// in one pair only their paths differ. A round whose trials are stored
// (a resumed or replayed run, or one from before) is taken trial by trial
// as it was measured, and so is one whose joint run fails, so that the
// failure is charged to the candidate that fails.
func (r *Runner) runTogether(ts []Trial, optional bool) ([]Trial, error) {
	stored := false
	for _, t := range ts {
		stored = stored || r.store.Has(t.key()) || r.store.Has(budgetStopKey(t.key()))
	}
	if stored || r.replayOnly || len(ts) < 2 || !sideBySide(ts) {
		return r.runEach(ts, optional)
	}
	first := ts[0]
	// The round's trials share stage and budget: the first's stop, stored,
	// sends a replay trial by trial to the same stop.
	if err := r.budgetFor(first, optional); err != nil {
		return nil, err
	}
	spec := r.pairSpec(first)
	spec.Settle = int(r.plan.Settle)
	for _, t := range ts {
		spec.Alternates = append(spec.Alternates, bench.Alternate{Name: t.Candidate, Transport: t.Transport, Options: t.Options.With(t.extra)})
	}
	began := time.Now()
	res, err := bench.Run(r.ctx, spec, r.plan.Stall, r.hooks)
	if err != nil {
		if r.ctx.Err() != nil || killedFromOutside(err) {
			return nil, fmt.Errorf("trials %s round %d side by side: %w (resume with --resume %s)", first.Stage, first.Round, err, r.dir)
		}
		fmt.Fprintf(r.progress, "  %s round %d side by side failed (%v); trial by trial instead\n", first.Stage, first.Round, err)
		return r.runEach(ts, optional)
	}
	each := time.Since(began).Seconds() / float64(len(ts))
	out := make([]Trial, len(ts))
	for i, t := range ts {
		t.Points, t.Together, t.Seconds = res.Alternates[i], true, each
		t.Failed = stalled(t)
		if err := r.keep(t); err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// sideBySide says whether trials can share a pair of ranks: a pair's
// pattern on host buffers within a node, none of them setting the
// allocator (the alternates share one arena of buffers, whose settings
// are the job's).
func sideBySide(ts []Trial) bool {
	for _, t := range ts {
		if t.GPU != nil || t.Nodes > 1 || t.Ranks > 2 || t.Pattern.MultiRank() || t.Pattern == bench.AllocChurn {
			return false
		}
		if own, _, err := hostmem.SplitOptions(t.Options.With(t.extra)); err != nil || len(own) > 0 {
			return false
		}
	}
	return true
}

// runEach runs the trials one after another, each in its own pair.
func (r *Runner) runEach(ts []Trial, optional bool) ([]Trial, error) {
	out := make([]Trial, 0, len(ts))
	for _, t := range ts {
		done, err := r.run(t, optional)
		if errors.Is(err, ErrBudget) && len(out) > 0 {
			return out, err
		}
		if err != nil {
			return nil, err
		}
		out = append(out, done)
	}
	return out, nil
}
