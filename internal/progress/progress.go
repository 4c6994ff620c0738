package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/vbauerster/cupwriter"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Interval is the least time between two plain progress lines of a stage.
const Interval = 15 * time.Second

// noBudget: a budget this long is none (a verification runs all its
// rounds), and the lines count what is done instead.
const noBudget = 1000 * time.Hour

// Meter shows a run's stages: a bar each on a terminal, plain lines
// elsewhere. Its methods may be called from any goroutine. What the bars'
// decorators read is atomic: they run in the bars' goroutines, which the
// methods wait on while holding mu.
type Meter struct {
	mu    sync.Mutex
	out   io.Writer // plain lines; nil on a terminal
	bars  *mpb.Progress
	now   func() time.Time
	stage *stage // the current stage
	// The run's clock as of the last trial: started is when the run
	// began (elapsed counted back, in Unix nanoseconds), budget its time
	// budget.
	started atomic.Int64
	budget  atomic.Int64
	total   atomic.Int64 // trials done in the run
	closed  bool
	unit    string    // what is counted: "trials" unless Unit says
	origin  time.Time // when New made the meter: Step's clock
}

// stage is one stage's count.
type stage struct {
	name          string
	planned, done atomic.Int64
	began         time.Time
	bar           *mpb.Bar
	lastLine      time.Time
}

// Option adjusts a new Meter.
type Option func(*Meter)

// Unit names what the meter counts, plural ("runs", "sizes"): the sweep
// counts trials (the default), anchors and stacks their benchmark runs.
func Unit(plural string) Option { return func(m *Meter) { m.unit = plural } }

// New returns a meter writing to w: bars when w is a terminal (an *os.File
// on one), plain lines otherwise.
func New(w io.Writer, opts ...Option) *Meter { return newMeter(w, nil, opts...) }

// newMeter is New with the bars redrawn on each receive from refresh
// instead of five times a second (tests; nil: the timer).
func newMeter(w io.Writer, refresh <-chan any, opts ...Option) *Meter {
	m := &Meter{now: time.Now, unit: "trials"}
	for _, o := range opts {
		o(m)
	}
	m.origin = m.now()
	m.started.Store(m.origin.UnixNano())
	if IsTerminal(w) {
		opts := []mpb.ContainerOption{mpb.WithOutput(w), mpb.WithWidth(32), mpb.WithRefreshRate(200 * time.Millisecond)}
		if refresh != nil {
			opts = append(opts, mpb.WithManualRefresh(refresh))
		}
		m.bars = mpb.New(opts...)
	} else {
		m.out = w
	}
	return m
}

// IsTerminal reports whether w is a terminal that bars can be drawn on:
// one with a size (a pseudo-terminal nobody sized, as script(1) makes
// without a terminal of its own, has rows for none).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || !(isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
		return false
	}
	cols, rows, err := cupwriter.New(f, false).GetTermSize()
	return err == nil && cols > 0 && rows > 0
}

// Writer is where the run's own lines go so that they do not tear the
// bars: above them on a terminal, straight to the output elsewhere.
func (m *Meter) Writer() io.Writer {
	if m.bars != nil {
		return lineWriter{m}
	}
	return m.out
}

// lineWriter prints above the bars until the meter is closed, then
// nowhere (the bars' container takes no more writes).
type lineWriter struct{ m *Meter }

func (l lineWriter) Write(p []byte) (int, error) {
	l.m.mu.Lock()
	closed := l.m.closed
	l.m.mu.Unlock()
	if closed {
		return len(p), nil
	}
	return l.m.bars.Write(p)
}

// Plan says that stageName will run up to trials more trials (of the
// meter's unit); a new stage closes the one before, done or cut short.
func (m *Meter) Plan(stageName string, trials int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if m.stage != nil && m.stage.name == stageName {
		planned := m.stage.planned.Add(int64(trials))
		if m.stage.bar != nil {
			m.stage.bar.SetTotal(planned, false)
		}
		return
	}
	m.endStage()
	m.startStage(stageName, trials)
	if m.bars == nil {
		fmt.Fprintf(m.out, "[%s] stage %s: %s planned%s\n", stamp(m.elapsed()), stageName, m.count(int64(trials)), suffix(m.budgetLeft()))
		m.stage.lastLine = m.now()
	}
}

// startStage makes stageName the current stage, with its bar on a
// terminal. m.mu is held.
func (m *Meter) startStage(stageName string, trials int) {
	s := &stage{name: stageName, began: m.now()}
	s.planned.Store(int64(trials))
	m.stage = s
	if m.bars != nil {
		s.bar = m.bars.AddBar(int64(trials),
			mpb.PrependDecorators(decor.Name(stageName, decor.WC{W: 22, C: decor.DindentRight}),
				decor.Any(func(decor.Statistics) string { return fmt.Sprintf("%d/%d", s.done.Load(), s.planned.Load()) }, decor.WC{W: 9})),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return m.clock(s) })))
	}
}

// Done says that a trial of stageName ended (line: what and how; reused:
// it came from the store); elapsed and budget are the run's.
func (m *Meter) Done(stageName, line string, reused bool, elapsed, budget time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.started.Store(m.now().Add(-elapsed).UnixNano())
	m.budget.Store(int64(budget))
	m.total.Add(1)
	if m.stage == nil || m.stage.name != stageName { // a trial no Plan announced
		m.endStage()
		m.startStage(stageName, 0)
	}
	s := m.stage
	done := s.done.Add(1)
	planned := max(s.planned.Load(), done)
	s.planned.Store(planned)
	if s.bar != nil {
		s.bar.SetTotal(planned, false)
		s.bar.SetCurrent(done)
		return
	}
	if now := m.now(); now.Sub(s.lastLine) >= Interval || done == planned {
		s.lastLine = now
		fmt.Fprintf(m.out, "[%s] %s: %d/%d %s%s%s\n", stamp(elapsed), s.name, done, planned, m.unit, m.stageLeft(s), suffix(m.budgetLeft()))
	}
}

// Step says that one more of stageName's units (a run, a size, a probe)
// ended, on the meter's own clock (since New) and without a budget: for
// commands that count work rather than spend a budget, so that their
// stages share one elapsed time.
func (m *Meter) Step(stageName, line string) {
	m.Done(stageName, line, false, m.now().Sub(m.origin), 0)
}

// Close ends the last stage and the bars; the meter shows nothing more.
func (m *Meter) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.endStage()
	m.closed = true
	bars := m.bars
	m.mu.Unlock()
	if bars != nil {
		bars.Wait()
	}
}

// endStage completes the current stage's bar where it stands (a stage cut
// by the budget ends short of its plan). m.mu is held.
func (m *Meter) endStage() {
	s := m.stage
	if s == nil {
		return
	}
	done, planned := s.done.Load(), s.planned.Load()
	if s.bar != nil {
		s.bar.SetTotal(done, true)
	} else if done < planned {
		fmt.Fprintf(m.out, "[%s] %s: ended after %d of %d planned %s\n", stamp(m.elapsed()), s.name, done, planned, m.unit)
	}
	m.stage = nil
}

// clock is a bar's times: the run's elapsed, the stage's estimate and
// what is left of the budget.
func (m *Meter) clock(s *stage) string {
	return fmt.Sprintf("%s%s%s", clock(m.elapsed()), m.stageLeft(s), suffix(m.budgetLeft()))
}

// elapsed is the run's time so far.
func (m *Meter) elapsed() time.Duration { return m.now().Sub(time.Unix(0, m.started.Load())) }

// stageLeft estimates the stage's remaining trials at its pace so far.
func (m *Meter) stageLeft(s *stage) string {
	done, planned := s.done.Load(), s.planned.Load()
	if done == 0 || done >= planned {
		return ""
	}
	per := m.now().Sub(s.began) / time.Duration(done)
	return fmt.Sprintf(", stage ~%s left", clock(per*time.Duration(planned-done)))
}

// budgetLeft says what is left of the budget ("" before the first trial
// told it).
func (m *Meter) budgetLeft() string {
	budget := time.Duration(m.budget.Load())
	if budget <= 0 || budget >= noBudget {
		if m.total.Load() == 0 {
			return ""
		}
		return m.count(m.total.Load()) + " done"
	}
	left := budget - m.elapsed()
	if left < 0 {
		return fmt.Sprintf("budget %s spent %s ago", clock(budget), clock(-left))
	}
	return fmt.Sprintf("≤ %s left of the %s budget", clock(left), clock(budget))
}

// suffix joins a non-empty s to what comes before it.
func suffix(s string) string {
	if s == "" {
		return ""
	}
	return "; " + s
}

// stamp is a line's time as the sweep's trial lines write it: m:ss
// with the minutes two wide.
func stamp(d time.Duration) string { return fmt.Sprintf("%5s", clock(d)) }

// clock writes a duration as m:ss.
func clock(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// count is n of the meter's unit: "1 trial", "3 trials".
func (m *Meter) count(n int64) string {
	if n == 1 {
		return "1 " + strings.TrimSuffix(m.unit, "s")
	}
	return fmt.Sprintf("%d %s", n, m.unit)
}
