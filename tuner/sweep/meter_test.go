package sweep

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/testutil"
)

// recordingMeter keeps what a sweep told its meter.
type recordingMeter struct {
	planned map[string]int
	done    map[string]int
	order   []string // stages in the order first told of
	errs    []string
}

func (m *recordingMeter) Plan(stage string, trials int) {
	if _, ok := m.planned[stage]; !ok {
		m.order = append(m.order, stage)
	}
	m.planned[stage] += trials
}

func (m *recordingMeter) Done(stage, line string, reused bool, elapsed, budget time.Duration) {
	if _, ok := m.planned[stage]; !ok {
		m.errs = append(m.errs, "trial of "+stage+" before its stage's plan: "+line)
	}
	if !reused || !strings.HasPrefix(line, stage) || budget >= 0 || elapsed < 0 {
		m.errs = append(m.errs, "replayed trial: "+line)
	}
	m.done[stage]++
}

// A replay (as gotune tune runs) tells the meter of every stage's plan
// before its trials, of every stored trial once, and never of more trials
// done than planned.
func TestMeterSeesEveryStageAndTrial(t *testing.T) {
	src := filepath.Join(testutil.ModuleRoot(t), "results/catalogue/vm")
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{MetaFile, MeasurementsFile + ".gz"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := &recordingMeter{planned: map[string]int{}, done: map[string]int{}}
	r, err := Open(context.Background(), Config{Resume: dir, Progress: io.Discard, Meter: m})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.budget, r.replayOnly = -1, true // as Tune
	res, err := r.finish(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range m.errs {
		t.Error(e)
	}
	total := 0
	for _, stage := range m.order {
		if m.done[stage] > m.planned[stage] {
			t.Errorf("stage %s: %d trials done of %d planned", stage, m.done[stage], m.planned[stage])
		}
		total += m.done[stage]
	}
	if total != res.Reused || total == 0 {
		t.Errorf("meter told of %d trials, the replay reused %d", total, res.Reused)
	}
	// (The verification replays only for the profile it measured: this
	// build's profile names another gotune, so its trials are not reused.)
	for _, stage := range []string{stageEager, stageFragment, stageDepth, stageTransport, stageAllocPol} {
		if m.done[stage] == 0 {
			t.Errorf("stage %s: no trial reached the meter (stages %v)", stage, m.order)
		}
	}
}

// A stalled rank's stacks are kept to their head.
func TestStackExcerpt(t *testing.T) {
	long := strings.Repeat("goroutine 1 [chan receive]:\n", 1000)
	got := stackExcerpt(map[int]string{0: "short\n", 1: long})
	if got[0] != "short\n" {
		t.Errorf("a short stack changed: %q", got[0])
	}
	if !strings.HasPrefix(got[1], long[:stackExcerptBytes]) || len(got[1]) > stackExcerptBytes+64 || !strings.Contains(got[1], "cut at 4 KiB") {
		t.Errorf("a long stack kept %d bytes, ending %q", len(got[1]), got[1][len(got[1])-40:])
	}
	if stackExcerpt(nil) != nil {
		t.Error("no stacks gave some")
	}
}
