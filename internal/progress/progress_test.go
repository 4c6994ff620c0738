package progress

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// fakeClock is a meter's clock that tests move by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newPlain(w io.Writer, c *fakeClock, opts ...Option) *Meter {
	m := New(w, opts...)
	m.now = c.now
	m.origin = c.t
	m.started.Store(c.t.UnixNano())
	return m
}

// Without a terminal the meter writes plain lines: a stage's start, then
// at most one line per Interval, the stage's last trial, and a stage cut
// short when the next one starts.
func TestPlainLines(t *testing.T) {
	var b bytes.Buffer
	c := &fakeClock{t: time.Unix(1000, 0)}
	m := newPlain(&b, c)
	budget := 5 * time.Minute
	elapsed := time.Duration(0)
	trial := func(stage string, d time.Duration) {
		c.add(d)
		elapsed += d
		m.Done(stage, stage+" trial", false, elapsed, budget)
	}
	m.Plan("eager", 4)
	trial("eager", 2*time.Second)               // within Interval of the stage line: quiet
	trial("eager", Interval)                    // a line
	trial("eager", time.Second)                 // quiet
	trial("eager", time.Second)                 // the last: a line
	m.Plan("fragment", 2)                       // the stage line
	trial("fragment", 20*time.Second)           // a line (Interval passed)
	m.Plan("transport", 3)                      // fragment cut short, then transport's line
	m.Done("verify", "x", true, elapsed, 0)     // unannounced stage, no budget known
	m.Done("verify", "x", true, elapsed, 1<<62) // nor here: a verification's
	m.Close()
	m.Plan("late", 1) // after Close: nothing
	want := `[ 0:00] stage eager: 4 trials planned
[ 0:17] eager: 2/4 trials, stage ~0:17 left; ≤ 4:43 left of the 5:00 budget
[ 0:19] eager: 4/4 trials; ≤ 4:41 left of the 5:00 budget
[ 0:19] stage fragment: 2 trials planned; ≤ 4:41 left of the 5:00 budget
[ 0:39] fragment: 1/2 trials, stage ~0:20 left; ≤ 4:21 left of the 5:00 budget
[ 0:39] fragment: ended after 1 of 2 planned trials
[ 0:39] stage transport: 3 trials planned; ≤ 4:21 left of the 5:00 budget
[ 0:39] transport: ended after 0 of 3 planned trials
[ 0:39] verify: 1/1 trials; 6 trials done
[ 0:39] verify: 2/2 trials; 7 trials done
`
	if got := b.String(); got != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
	if m.Writer() != io.Writer(&b) {
		t.Errorf("Writer() is not the output without a terminal")
	}
}

// A meter of another unit counts it in every line; Step times the units
// on the meter's own clock, with no budget, so the lines count the units
// done across stages.
func TestStepsInAUnit(t *testing.T) {
	var b bytes.Buffer
	c := &fakeClock{t: time.Unix(1000, 0)}
	m := newPlain(&b, c, Unit("runs"))
	m.Plan("latency", 2)
	c.add(3 * time.Second)
	m.Step("latency", "round 1/2: a latency")
	c.add(3 * time.Second)
	m.Step("latency", "round 2/2: a latency")
	m.Plan("bw", 3)
	c.add(20 * time.Second)
	m.Step("bw", "round 1/3: a bw")
	m.Close()
	want := `[ 0:00] stage latency: 2 runs planned
[ 0:06] latency: 2/2 runs; 2 runs done
[ 0:06] stage bw: 3 runs planned; 2 runs done
[ 0:26] bw: 1/3 runs, stage ~0:40 left; 3 runs done
[ 0:26] bw: ended after 1 of 3 planned runs
`
	if got := b.String(); got != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
}

// On a pseudo-terminal, as a user's terminal shows it, the meter draws a
// bar per stage that redraws in place (cursor movement), with the stage,
// its trials done of planned and the budget; lines written through
// Writer appear above the bars.
func TestBarsOnPseudoTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	if IsTerminal(tty) {
		t.Fatal("IsTerminal: true on a pseudo-terminal of no size")
	}
	if err := pty.Setsize(tty, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	screen := make(chan string)
	go func() {
		b, _ := io.ReadAll(ptmx) // until the tty side is closed (EIO)
		screen <- string(b)
	}()
	if !IsTerminal(tty) {
		t.Fatal("IsTerminal: false on a sized pseudo-terminal")
	}
	refresh := make(chan any)
	m := newMeter(tty, refresh)
	if m.Writer() == io.Writer(tty) {
		t.Fatal("Writer() on a terminal writes past the bars")
	}
	m.Plan("eager", 3)
	for i := range 3 {
		io.WriteString(m.Writer(), "[0:01] eager trial line\n")
		m.Done("eager", "line", false, time.Duration(i+1)*time.Second, 5*time.Minute)
		refresh <- nil // a redraw: the next one moves the cursor back over it
	}
	m.Plan("fragment", 2)
	m.Done("fragment", "line", false, 4*time.Second, 5*time.Minute)
	refresh <- nil
	m.Close()
	io.WriteString(m.Writer(), "after close\n") // dropped, not a panic
	tty.Close()
	out := <-screen
	for _, want := range []string{"eager", "3/3 [", "fragment", "1/2 [", "left of the 5:00 budget", "eager trial line", "\x1b[1A\x1b[J"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output has no %q:\n%q", want, out)
		}
	}
	if strings.Contains(out, "after close") {
		t.Errorf("a line written after Close reached the terminal")
	}
}

func TestIsTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		w    io.Writer
		want bool
	}{{f, false}, {&bytes.Buffer{}, false}, {nil, false}} {
		if got := IsTerminal(c.w); got != c.want {
			t.Errorf("IsTerminal(%T) = %v", c.w, got)
		}
	}
}
