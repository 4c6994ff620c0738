package probe

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports"
)

// Outcome is a probe's result.
type Outcome int

const (
	Passed         Outcome = iota
	HazardDetected         // hang, stall or corrupted data
	ProbeFailed            // the probe could not run or broke for another reason
)

func (o Outcome) String() string {
	return [...]string{"passed", "hazard detected", "probe failed"}[o]
}

// Verdict is what a probe run concluded.
type Verdict struct {
	ID       string
	Unsafe   bool
	Outcome  Outcome
	Detail   string
	Stacks   map[int]string // of stalled ranks, when the watchdog fired
	Duration time.Duration
	// Measured holds what a passing probe timed that the tuner weighs
	// (H2: allocate+free per buffer of the mode probed), by name.
	Measured map[string]float64
}

// Line is the one-line summary the CLI prints.
func (v Verdict) Line() string {
	variant := "safe"
	if v.Unsafe {
		variant = "unsafe"
	}
	return fmt.Sprintf("%s %s: %s: %s (%v)", v.ID, variant, v.Outcome, v.Detail, v.Duration.Round(time.Millisecond))
}

// Probe is one hazard check.
type Probe struct {
	ID          string
	Hazard      string
	Description string
	// Run executes the safe or unsafe variant; deadline is the watchdog's
	// stall deadline for every rank job it starts. A probe registered with
	// RunOptions and no Run runs that on the defaults (nil options).
	Run func(ctx context.Context, unsafe bool, deadline time.Duration) Verdict
	// RunOptions, when set, runs the probe on a candidate configuration:
	// opts (transport and allocator options) under the probe's own stress
	// settings. The tuner probes what it is about to emit through it.
	RunOptions func(ctx context.Context, unsafe bool, deadline time.Duration, opts transports.Options) Verdict
	// ScalesWithRanks: the probe also runs at the rank count WithRanks
	// sets, so its verdict holds for that count.
	ScalesWithRanks bool
	// Deadlines is about how many stall deadlines its safe and unsafe
	// variants take together, for a budget's estimate (0: DefaultDeadlines).
	Deadlines int
}

// DefaultDeadlines is Probe.Deadlines where a probe does not say: a
// variant that passes takes moments, one caught waits out a deadline.
const DefaultDeadlines = 4

// Cost is about how long p's two variants take at this stall deadline.
func (p *Probe) Cost(deadline time.Duration) time.Duration {
	return time.Duration(cmp.Or(p.Deadlines, DefaultDeadlines)) * deadline
}

// ranksKey carries WithRanks's count on a context.
type ranksKey struct{}

// WithRanks asks the probes that scale with the ranks of a node (H5) to
// also run at n ranks, the count the configuration will serve; n of 3 or
// fewer adds nothing. It travels on the context because only those probes
// read it.
func WithRanks(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, ranksKey{}, n)
}

// RanksFrom is the count WithRanks set, 0 if none.
func RanksFrom(ctx context.Context) int {
	n, _ := ctx.Value(ranksKey{}).(int)
	return n
}

// RunWith runs p on opts where it takes a configuration, else its fixed form.
func RunWith(ctx context.Context, p *Probe, unsafe bool, deadline time.Duration, opts transports.Options) Verdict {
	if p.RunOptions != nil {
		return p.RunOptions(ctx, unsafe, deadline, opts)
	}
	return p.Run(ctx, unsafe, deadline)
}

var registry []*Probe

// quiet runs probe ranks without forwarding their output: what matters
// comes back in the verdict (the stalled ranks' stacks included).
// GOTUNE_PROBE_VERBOSE=1 forwards it, to see why a probe's rank failed.
var quiet = launch.Hooks{Stderr: probeStderr()}

func probeStderr() io.Writer {
	if os.Getenv("GOTUNE_PROBE_VERBOSE") != "" {
		return os.Stderr
	}
	return io.Discard
}

func register(p *Probe) { registry = append(registry, stamped(p)) }

// stamped is p with its runs labelled and timed (a Verdict's ID, Unsafe and
// Duration are set here, not by each probe); without a Run of its own it
// runs RunOptions on nil options.
func stamped(p *Probe) *Probe {
	stamp := func(unsafe bool, run func() Verdict) Verdict {
		start := time.Now()
		v := run()
		v.ID, v.Unsafe, v.Duration = p.ID, unsafe, time.Since(start)
		return v
	}
	withOptions, run := p.RunOptions, p.Run
	if withOptions != nil {
		p.RunOptions = func(ctx context.Context, unsafe bool, deadline time.Duration, opts transports.Options) Verdict {
			return stamp(unsafe, func() Verdict { return withOptions(ctx, unsafe, deadline, opts) })
		}
	}
	if run == nil {
		run = func(ctx context.Context, unsafe bool, deadline time.Duration) Verdict {
			return withOptions(ctx, unsafe, deadline, nil)
		}
	}
	p.Run = func(ctx context.Context, unsafe bool, deadline time.Duration) Verdict {
		return stamp(unsafe, func() Verdict { return run(ctx, unsafe, deadline) })
	}
	return p
}

// List returns every probe, by ID.
func List() []*Probe {
	l := slices.Clone(registry)
	slices.SortFunc(l, func(a, b *Probe) int { return strings.Compare(a.ID, b.ID) })
	return l
}

// Lookup finds a probe by ID (case-insensitive).
func Lookup(id string) (*Probe, error) {
	for _, p := range registry {
		if strings.EqualFold(p.ID, id) {
			return p, nil
		}
	}
	var ids []string
	for _, p := range List() {
		ids = append(ids, p.ID)
	}
	return nil, fmt.Errorf("unknown probe %q (have %s)", id, strings.Join(ids, ", "))
}

// corruptionMarker starts every payload-validation error (bench's and the
// probes'); errors cross the process boundary as text.
const corruptionMarker = "payload validation failed"

// classify turns a rank job's error into an outcome.
func classify(err error) (Outcome, string, map[int]string) {
	var stall *launch.StallError
	switch {
	case err == nil:
		return Passed, "", nil
	case errors.As(err, &stall):
		return HazardDetected, fmt.Sprintf("hang: %v", stall), stall.Stacks
	case strings.Contains(err.Error(), corruptionMarker):
		return HazardDetected, "corrupted data: " + err.Error(), nil
	case strings.Contains(err.Error(), couplingMarker):
		return HazardDetected, err.Error(), nil
	default:
		return ProbeFailed, err.Error(), nil
	}
}

// runRanks runs job and decodes every rank's report into an R. A job that
// fails, or a report that does not decode, leaves its verdict in v (the
// job's failure after setting) and returns false.
func runRanks[R any](ctx context.Context, job launch.Job, setting string, v *Verdict) ([]R, bool) {
	out, err := launch.Run(ctx, job, quiet)
	if v.Outcome, v.Detail, v.Stacks = classify(err); v.Outcome != Passed {
		v.Detail = setting + ": " + v.Detail
		return nil, false
	}
	reps := make([]R, len(out))
	for r := range out {
		if err := json.Unmarshal(out[r], &reps[r]); err != nil {
			v.Outcome, v.Detail = ProbeFailed, fmt.Sprintf("decode rank %d's report: %v", r, err)
			return nil, false
		}
	}
	return reps, true
}

// rankEnv is the transport environment of a probe's rank.
var rankEnv = bench.RankEnv
