package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports"
)

// A rank announces each step it starts with a line on its stderr: the
// marker, then the step as JSON. The launcher's side of Run takes these
// lines out of the ranks' output, so that it can say what the run is
// doing and, when it is interrupted, where it was.
const stepMarker = "\x1egotune-step "

// step is the seq-th step of a rank; every rank takes its steps in the
// same order, so the lowest seq is the rank that is behind.
type step struct {
	Rank int    `json:"rank"`
	Seq  int    `json:"seq"`
	What string `json:"what"`
	// Point is the 1-based index in the spec's sizes of the size this
	// step measures (0: the step measures none): the sizes before it are
	// done.
	Point int `json:"point,omitempty"`
}

// stepper announces one rank's steps on w; a nil stepper announces
// nothing.
type stepper struct {
	w    io.Writer
	rank int
	seq  int
}

// start announces the step now beginning. The line goes out in one write,
// so that the lines of two ranks never mix.
func (s *stepper) start(format string, args ...any) {
	s.announce(0, format, args...)
}

// measure announces the measurement of the i-th (from 0) of spec's sizes.
func (s *stepper) measure(spec Spec, i int) {
	s.announce(i+1, "measuring %s at %s", spec.Pattern, transports.FormatSize(spec.Sizes[i]))
}

// announce writes a step; point as in step.
func (s *stepper) announce(point int, format string, args ...any) {
	if s == nil {
		return
	}
	s.seq++
	b, err := json.Marshal(step{Rank: s.rank, Seq: s.seq, What: fmt.Sprintf(format, args...), Point: point})
	if err != nil {
		return
	}
	s.w.Write(append(append([]byte(stepMarker), b...), '\n'))
}

// RunOption adjusts Run.
type RunOption func(*runOptions)

type runOptions struct {
	progress io.Writer
	meter    Meter
	onChange func(what string) // sees every new step (tests)
}

// Meter counts a run's sizes as they are measured; internal/progress's
// Meter satisfies it (a bar on a terminal). Declared here so that bench
// does not depend on how progress is shown.
type Meter interface {
	// Plan says that stage (the pattern) will measure n more sizes.
	Plan(stage string, n int)
	// Step says that a size of stage has been measured; line says which.
	Step(stage, line string)
}

// WithMeter tells m of the sizes measured: the pattern as the stage with
// the spec's sizes planned (the settling pass is not one), then a size
// each time the rank that is behind starts the next one, and the rest
// when the run succeeds. A failed run leaves m where its ranks were.
func WithMeter(m Meter) RunOption {
	return func(o *runOptions) { o.meter = m }
}

// WithProgress makes Run write to w what it is doing before each step that
// may take a while: starting the ranks, opening GPUs, allocating buffers,
// the settling pass, each size. Lines come at most once a second, the
// first half a second after the ranks are started, each naming the step
// current then, so a quick run writes none.
func WithProgress(w io.Writer) RunOption {
	return func(o *runOptions) { o.progress = w }
}

// Pacing of the progress lines.
const (
	progressDelay    = 500 * time.Millisecond // after the ranks are started
	progressInterval = time.Second            // between lines
)

// tracker follows a run's steps: the launcher's own until the ranks
// announce theirs, then the step of the rank that is behind.
type tracker struct {
	ctx   context.Context
	out   io.Writer // progress lines; nil: none
	size  int       // ranks
	now   func() time.Time
	after func(d time.Duration, f func()) (stop func() bool)
	// onChange, if set, sees every new step description (tests).
	onChange func(what string)
	meter    Meter // told of the sizes measured; nil: none
	spec     Spec  // the sizes the meter counts

	mu        sync.Mutex
	began     time.Time
	parent    string       // the launcher's step
	ranks     map[int]step // each rank's current step
	measured  map[int]int  // each rank's sizes done, as of its last size begun
	counted   int          // sizes the meter was told of
	started   time.Time    // when the rank processes were started (zero: not yet)
	printed   string       // the last line's step
	lastPrint time.Time
	pending   func() bool // stops the scheduled line, if any
	done      bool
}

func newTracker(ctx context.Context, out io.Writer, size int) *tracker {
	t := &tracker{ctx: ctx, out: out, size: size, now: time.Now, ranks: map[int]step{}, measured: map[int]int{},
		after: func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }}
	t.began = t.now()
	return t
}

// setParent records the launcher's step.
func (t *tracker) setParent(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.parent = what
	t.changed()
}

// ranksStarted records that the rank processes exist.
func (t *tracker) ranksStarted() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.started = t.now()
	t.changed()
}

// rankStep records a step a rank announced. Once the run's context is
// done the steps stay where they were, for the interruption's message.
func (t *tracker) rankStep(line []byte) {
	var s step
	if json.Unmarshal(line, &s) != nil || t.ctx.Err() != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.ranks[s.Rank]; ok && old.Seq >= s.Seq {
		return
	}
	t.ranks[s.Rank] = s
	if s.Point > 0 {
		t.measured[s.Rank] = s.Point - 1
	}
	t.changed()
	if len(t.measured) == t.size {
		t.count(slices.Min(slices.Collect(maps.Values(t.measured))))
	}
}

// plan tells the meter, if any, of spec's sizes.
func (t *tracker) plan(spec Spec) {
	if t.meter != nil {
		t.spec = spec
		t.meter.Plan(string(spec.Pattern), len(spec.Sizes))
	}
}

// measuredAll tells the meter, if any, that all n sizes of a run that
// succeeded are measured.
func (t *tracker) measuredAll(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.count(n)
}

// count tells the meter, if any, that the first done sizes are measured.
// t.mu is held.
func (t *tracker) count(done int) {
	if t.meter == nil {
		return
	}
	for ; t.counted < min(done, len(t.spec.Sizes)); t.counted++ {
		t.meter.Step(string(t.spec.Pattern), fmt.Sprintf("%s at %s", t.spec.Pattern, transports.FormatSize(t.spec.Sizes[t.counted])))
	}
}

// current says what the run is doing: the launcher's step until every
// rank announced one, then the step of the rank that is behind (the lower
// rank of two alike). t.mu is held.
func (t *tracker) current() string {
	if len(t.ranks) < t.size || len(t.ranks) == 0 {
		return t.parent
	}
	var behind step
	found := false
	for _, s := range t.ranks {
		if !found || s.Seq < behind.Seq || s.Seq == behind.Seq && s.Rank < behind.Rank {
			behind, found = s, true
		}
	}
	return behind.What
}

// changed reacts to a new step: tells onChange, and schedules a line.
// t.mu is held.
func (t *tracker) changed() {
	what := t.current()
	if t.onChange != nil {
		t.onChange(what)
	}
	if t.out == nil || t.done || t.started.IsZero() || t.pending != nil || what == t.printed {
		return
	}
	due := t.started.Add(progressDelay)
	if !t.lastPrint.IsZero() {
		due = t.lastPrint.Add(progressInterval)
	}
	t.pending = t.after(max(due.Sub(t.now()), 0), t.flush)
}

// flush writes the step current now, if it is not the last one written.
func (t *tracker) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = nil
	what := t.current()
	if t.done || what == t.printed {
		return
	}
	t.printed, t.lastPrint = what, t.now()
	fmt.Fprintf(t.out, "[%s] %s\n", clock(t.lastPrint.Sub(t.began)), what)
}

// finish stops the lines.
func (t *tracker) finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
	if t.pending != nil {
		t.pending()
		t.pending = nil
	}
}

// where says what the run was doing and since when the ranks ran:
// "measuring bw at 1M (rank processes started 20s ago)".
func (t *tracker) where() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.current()
	if !t.started.IsZero() {
		s += fmt.Sprintf(" (rank processes started %s ago)", ago(t.now().Sub(t.started)))
	}
	return s
}

// filter returns a writer that takes the ranks' step lines out of what
// they write and passes the rest on to w.
func (t *tracker) filter(w io.Writer) io.Writer { return &stepFilter{t: t, next: w} }

type stepFilter struct {
	t    *tracker
	next io.Writer
}

// Write passes p on without its step lines. A rank writes each step line
// whole; one torn across two writes passes through as it is.
func (f *stepFilter) Write(p []byte) (int, error) {
	marker := []byte(stepMarker)
	if !bytes.Contains(p, marker) {
		return f.next.Write(p)
	}
	var pass []byte
	rest := p
	for len(rest) > 0 {
		i := bytes.Index(rest, marker)
		if i < 0 {
			pass = append(pass, rest...)
			break
		}
		pass = append(pass, rest[:i]...)
		end := bytes.IndexByte(rest[i:], '\n')
		if end < 0 {
			pass = append(pass, rest[i:]...)
			break
		}
		f.t.rankStep(rest[i+len(marker) : i+end])
		rest = rest[i+end+1:]
	}
	if len(pass) > 0 {
		if _, err := f.next.Write(pass); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// withoutSteps removes step lines from a rank's output (the stacks of a
// stall).
func withoutSteps(s string) string {
	if !strings.Contains(s, stepMarker) {
		return s
	}
	lines := strings.SplitAfter(s, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(l, stepMarker) {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "")
}

// hooks wraps the caller's launch hooks: the ranks' output goes through
// the filter, and their start is recorded.
func (t *tracker) hooks(h launch.Hooks) launch.Hooks {
	next := h.Stderr
	if next == nil {
		next = defaultStderr
	}
	h.Stderr = t.filter(next)
	started := h.Started
	h.Started = func(pids []int) {
		t.ranksStarted()
		if started != nil {
			started(pids)
		}
	}
	return h
}

// clock writes an elapsed time as m:ss.
func clock(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// ago writes a duration to the second, or to the millisecond below one.
func ago(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// defaultStderr is where the ranks' output goes when the hooks name no
// writer, as in launch.
var defaultStderr io.Writer = os.Stderr

// explain adds to an error of Run where the run was, when its context is
// done, and takes the step lines out of a stall's stacks.
func (t *tracker) explain(err error) error {
	var stall *launch.StallError
	if errors.As(err, &stall) {
		for r, s := range stall.Stacks {
			stall.Stacks[r] = withoutSteps(s)
		}
	}
	if t.ctx.Err() == nil {
		return err
	}
	return fmt.Errorf("interrupted while %s: %w", t.where(), err)
}

// buffersWhat names the message buffers a rank allocates.
func buffersWhat(s Spec, rank int) string {
	largest := transports.FormatSize(max(slices.Max(s.Sizes), s.Settle))
	if k := s.MemKind(rank); k != cuda.MemHost {
		return fmt.Sprintf("%s message buffers on the GPU (largest %s)", k, largest)
	}
	return fmt.Sprintf("message buffers (largest %s)", largest)
}
