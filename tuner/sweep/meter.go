package sweep

import (
	"fmt"
	"time"
)

// Meter follows a sweep as it goes (a progress bar on a terminal, periodic
// lines elsewhere): told how many trials a stage plans before it runs
// them, and of every trial that ends. Planned counts grow as a stage adds
// rounds or bisects; a stage cut by the budget ends short of its plan, and
// the next stage's Plan (or the end of the run) closes it.
type Meter interface {
	// Plan says that stage will run up to trials more trials.
	Plan(stage string, trials int)
	// Done says that a trial of stage ended (reused: it was in the store):
	// line is what it was and how it went; elapsed and budget are the
	// run's time so far (a resumed run's included) and its budget.
	Done(stage, line string, reused bool, elapsed, budget time.Duration)
}

// meterPlan tells the meter, if any, of a stage's planned trials.
func (r *Runner) meterPlan(stage string, trials int) {
	if r.meter != nil && trials > 0 {
		r.meter.Plan(stage, trials)
	}
}

// meterDone tells the meter, if any, that trial t ended.
func (r *Runner) meterDone(t Trial, reused bool, status string) {
	if r.meter != nil {
		r.meter.Done(t.Stage, trialLine(t, status), reused, time.Since(r.start), r.budget)
	}
}

// trialLine is a trial as the progress lines show it.
func trialLine(t Trial, status string) string {
	pattern := string(t.Pattern)
	if t.Ranks > 0 {
		pattern += fmt.Sprintf("/%d", t.Ranks)
	}
	return fmt.Sprintf("%-9s %-14s %-7s round %d  %s", t.Stage, t.Candidate, pattern, t.Round, status)
}

// stackExcerptBytes bounds the stacks kept of each stalled rank: what a
// rank prints after SIGQUIT opens with the dumping goroutine and then
// goroutine 1, where a rank's work runs, and the store is checked in.
const stackExcerptBytes = 4 << 10

// stackExcerpt keeps the head of each rank's stacks (nil for none).
func stackExcerpt(stacks map[int]string) map[int]string {
	if len(stacks) == 0 {
		return nil
	}
	out := make(map[int]string, len(stacks))
	for r, s := range stacks {
		if len(s) > stackExcerptBytes {
			s = s[:stackExcerptBytes] + "\n[... cut at 4 KiB]\n"
		}
		out[r] = s
	}
	return out
}
