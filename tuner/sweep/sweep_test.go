package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/profile"

	_ "github.com/gotune/gotune/transports/all"
)

func TestMain(m *testing.M) {
	launch.MaybeRunRank()
	os.Exit(m.Run())
}

// tinyPlan exercises every stage with the fewest trials; POSIX segments so
// that leftovers in /dev/shm would show.
func tinyPlan() Plan {
	p := Quick()
	p.Name, p.Budget = "tiny", 5*time.Minute
	p.Rounds, p.MaxRound, p.Reps, p.RepBytes, p.Window, p.Segment = 2, 3, 2, 4<<20, 8, "posix"
	p.Eager, p.EagerSizes = parseText[Size]("1K", "4K"), mustSizes("512,2K")
	p.Fragments, p.FragmentSizes = parseText[Fragment]("64Kx4", "64Kx16"), mustSizes("64K,1M")
	p.Depths, p.DepthSizes, p.ConfirmSizes = []int{8, 64}, mustSizes("8"), mustSizes("1K")
	p.TransportSizes, p.LadderStep = mustSizes("8K:1M"), 2
	// sm and cma only: the counts below must not depend on which kernel
	// modules this machine has (present_test.go covers knem and xpmem).
	p.Transports = []string{"sm", "cma"}
	p.AllocPurges, p.AllocTHP, p.AllocCaches, p.AllocSizes = []string{"immediate", "never"}, []bool{false}, parseText[Size]("8M"), mustSizes("64K")
	p.Probes = []string{"H5"}
	p.VerifySizes, p.VerifyRounds = mustSizes("1K,64K,1M"), 1
	p.Settle = 768 << 10 // no stage measures it (bisection halves only powers of two): a point of it left in a trial shows
	return p
}

// settledTrials fails unless every stored trial's points are exactly the
// sizes it asked for: the settling point each trial opened with is gone.
func settledTrials(t *testing.T, dir string, settle int) {
	t.Helper()
	n := 0
	for _, tr := range storedTrials(t, dir) {
		if tr.Failed != "" {
			continue
		}
		got := make([]int, len(tr.Points))
		for i, p := range tr.Points {
			got[i] = p.Size
		}
		if !slices.Equal(got, tr.Sizes) || slices.Contains(got, settle) {
			t.Fatalf("trial %s %s round %d: points at %v, asked for %v (settling point %d)", tr.Stage, tr.Candidate, tr.Round, got, tr.Sizes, settle)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no measured trial stored")
	}
}

// storedKeys returns the trial keys of a run's store and fails on a
// duplicate: a trial measured twice.
func storedKeys(t *testing.T, dir string) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for _, r := range storedRecords(t, dir) {
		if keys[r.Key] {
			t.Fatalf("record %s stored twice: a finished trial was measured again", r.Key)
		}
		keys[r.Key] = true
	}
	return keys
}

// shmLeftovers are the segments this process launched and those of
// launchers that are gone; the live ones of tests running beside this one
// are not left over.
func shmLeftovers(t *testing.T) []string {
	t.Helper()
	mine, _ := filepath.Glob(filepath.Join(launch.ShmDir, fmt.Sprintf("%s%d-*", launch.ShmPrefix, os.Getpid())))
	return append(mine, launch.StaleSegments()...)
}

func TestSweepEmitsAndTuneRedecides(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real rank processes")
	}
	out := t.TempDir()
	res, err := Run(context.Background(), Config{Plan: tinyPlan(), Out: out})
	if err != nil {
		t.Fatal(err)
	}
	plannedCovers(t, res.Dir, tinyPlan())
	for _, f := range []string{MetaFile, MeasurementsFile, BenchFile, SummaryFile, ProfileFile} {
		if st, err := os.Stat(filepath.Join(res.Dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: missing or empty (%v)", f, err)
		}
	}
	p, err := profile.Load(res.ProfilePath)
	if err != nil {
		t.Fatalf("emitted profile does not load: %v", err)
	}
	d := p.Decisions[profile.Intranode][profile.HostHost]
	if d.EagerLimit != 1024 && d.EagerLimit != 4096 {
		t.Fatalf("eager limit %d is not a candidate", d.EagerLimit)
	}
	if len(p.Safety) != 1 || p.Safety[0].Probe != "H5" || p.Safety[0].Outcome != "passed" {
		t.Fatalf("safety verdicts %+v", p.Safety)
	}
	summary, _ := os.ReadFile(filepath.Join(res.Dir, SummaryFile))
	for _, want := range []string{"## eager", "## transport", "## decisions", "H5  unsafe: hazard detected", "## verify"} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	bench, _ := os.ReadFile(filepath.Join(res.Dir, BenchFile))
	if !strings.Contains(string(bench), "BenchmarkBW/transport=auto/size=65536") {
		t.Errorf("Go benchmark format lacks the verification trials:\n%.2000s", bench)
	}
	settledTrials(t, res.Dir, 768<<10)
	before := storedKeys(t, res.Dir)

	tuned, err := Tune(context.Background(), res.Dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tuned.Measured != 0 {
		t.Fatalf("tune measured %d trials", tuned.Measured)
	}
	again, err := profile.Load(filepath.Join(res.Dir, ProfileFile))
	if err != nil {
		t.Fatal(err)
	}
	if again.Hash != p.Hash {
		t.Fatalf("tune re-decided differently from the same data: %s, then %s", p.Hash, again.Hash)
	}
	if after := storedKeys(t, res.Dir); len(after) != len(before) {
		t.Fatalf("tune stored %d new records", len(after)-len(before))
	}
	if left := shmLeftovers(t); len(left) > 0 {
		t.Fatalf("left in /dev/shm: %v", left)
	}
	tuneUnverified(t, res.Dir)
	verifyEmitted(t, out, res.Dir, res.ProfilePath)
}

// tuneUnverified: a run whose stored verification measured another profile
// than the one tune re-emits (a newer gotune, changed decisions) still
// gets its profile, with a note that it was not verified, not an error.
func tuneUnverified(t *testing.T, dir string) {
	copyDir := filepath.Join(t.TempDir(), "host", filepath.Base(dir))
	if err := os.MkdirAll(copyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{MetaFile, MeasurementsFile} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == MeasurementsFile { // the verification trials are of another profile: drop them
			var keep []string
			for _, line := range strings.SplitAfter(string(b), "\n") {
				if !strings.Contains(line, `"stage":"verify"`) {
					keep = append(keep, line)
				}
			}
			b = []byte(strings.Join(keep, ""))
		}
		if err := os.WriteFile(filepath.Join(copyDir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Tune(context.Background(), copyDir, nil)
	if err != nil {
		t.Fatalf("tune without the profile's verification: %v", err)
	}
	if res.ProfilePath == "" || res.Measured != 0 {
		t.Fatalf("tune: profile %q, %d measured; want a profile and nothing measured", res.ProfilePath, res.Measured)
	}
	summary, _ := os.ReadFile(filepath.Join(copyDir, SummaryFile))
	if !strings.Contains(string(summary), "measure it with gotune verify") {
		t.Errorf("summary does not say the profile is unverified:\n%s", summary)
	}
}

// verifyEmitted runs gotune verify on a sweep's profile: its own run
// directory and summary, a killed run's finished rounds kept on resume,
// and run directories of the other kind refused.
func verifyEmitted(t *testing.T, out, sweepDir, path string) {
	plan := tinyPlan()
	plan.VerifySizes, plan.VerifyRounds = mustSizes("1K,64K"), 2
	var jobs atomic.Int32
	// A round's candidates run side by side in one job (runTogether): a
	// rank of the second round's killed from outside stops the run.
	killSecond := launch.Hooks{Stderr: ioDiscard{}, Started: func(pids []int) {
		if jobs.Add(1) == 2 {
			syscall.Kill(pids[1], syscall.SIGKILL)
		}
	}}
	_, err := Verify(context.Background(), Config{Plan: plan, Out: out, Hooks: killSecond}, path, "")
	if err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("a verification round whose rank was killed: err = %v, want one that says how to resume", err)
	}
	dir := strings.TrimSuffix(err.Error()[strings.LastIndex(err.Error(), "--resume ")+len("--resume "):], ")")
	if done := storedKeys(t, dir); len(done) != 3 {
		t.Fatalf("%s: %d trials stored before the kill, want 3 (the first round's)", dir, len(done))
	}
	res, err := Verify(context.Background(), Config{Resume: dir}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Reused != 3 || res.Measured != 3 { // auto, cma and sm, two rounds
		t.Fatalf("resumed verification: %d reused, %d measured; want 3 and 3", res.Reused, res.Measured)
	}
	storedKeys(t, dir) // fails on a trial stored twice
	if m, _ := os.ReadFile(filepath.Join(dir, MeasurementsFile)); strings.Count(string(m), `"together":true`) != 6 {
		t.Errorf("%d of 6 trials measured side by side, want all", strings.Count(string(m), `"together":true`))
	}
	summary, _ := os.ReadFile(filepath.Join(dir, SummaryFile))
	for _, want := range []string{"gotune verify", path, "2 interleaved rounds", "geomean auto/sm"} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("verification summary lacks %q:\n%s", want, summary)
		}
	}
	if _, err := Verify(context.Background(), Config{Resume: sweepDir}, "", ""); err == nil || !strings.Contains(err.Error(), "not a verification") {
		t.Errorf("verify --resume of a sweep's directory: err = %v", err)
	}
	if _, err := Run(context.Background(), Config{Resume: dir}); err == nil || !strings.Contains(err.Error(), "gotune verify --resume") {
		t.Errorf("sweep --resume of a verification's directory: err = %v", err)
	}
	// Two profiles side by side (here the same one twice): the second is
	// measured through auto as a column of its own, no single transport.
	plan.VerifyRounds = 1
	res, err = Verify(context.Background(), Config{Plan: plan, Out: out}, path, path)
	if err != nil {
		t.Fatal(err)
	}
	if res.Measured != 2 {
		t.Errorf("verify --against: %d trials measured, want 2 (each profile, one round)", res.Measured)
	}
	summary, _ = os.ReadFile(filepath.Join(res.Dir, SummaryFile))
	for _, want := range []string{"against: " + path, "geomean auto/against", "(sent alike by both profiles: the rounds' noise)", "the two profiles send every size alike"} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("verify --against summary lacks %q:\n%s", want, summary)
		}
	}
	if strings.Contains(string(summary), "auto/sm") {
		t.Errorf("verify --against measured the single transports too:\n%s", summary)
	}
	// A second profile that sends 64 KiB by sm's pipeline where the first
	// sends it by cma (or the reverse): the ratio at 64 KiB is theirs, the
	// one at 1 KiB the rounds' noise.
	other, err := profile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d := other.Decisions[profile.Intranode][profile.HostHost]
	d.Ranges = []profile.Range{{Min: 0, Transport: "sm", Protocol: "eager"}, {Min: d.EagerLimit + 1, Transport: "sm", Protocol: "pipeline"}}
	if r, _ := other.Route(profile.Intranode, profile.HostHost, 64<<10); r.Transport == "sm" {
		d.Ranges = append(d.Ranges, profile.Range{Min: 32 << 10, Transport: "cma", Protocol: "rendezvous", Mode: "pull"})
	}
	other.Decisions[profile.Intranode][profile.HostHost] = d
	otherPath := filepath.Join(t.TempDir(), "other.yaml")
	if err := profile.Write(otherPath, other); err != nil {
		t.Fatal(err)
	}
	if res, err = Verify(context.Background(), Config{Plan: plan, Out: out}, path, otherPath); err != nil {
		t.Fatal(err)
	}
	summary, _ = os.ReadFile(filepath.Join(res.Dir, SummaryFile))
	for _, want := range []string{"(sent alike by both profiles: the rounds' noise)", "where the profiles send differently: paired"} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("verify --against a profile that differs at 64K: summary lacks %q:\n%s", want, summary)
		}
	}
	for _, line := range strings.Split(string(summary), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "64K" && strings.Contains(line, "sent alike") {
			t.Errorf("64K is marked sent alike: %s", line)
		}
	}
}

func TestSweepResumesAfterRankKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real rank processes")
	}
	out := t.TempDir()
	var jobs atomic.Int32
	killOn := func(n int32) launch.Hooks {
		return launch.Hooks{Stderr: ioDiscard{}, Started: func(pids []int) {
			if k := jobs.Add(1); k == n || k == n+1 { // the trial and its retry
				syscall.Kill(pids[1], syscall.SIGKILL)
			}
		}}
	}
	_, err := Run(context.Background(), Config{Plan: tinyPlan(), Out: out, Hooks: killOn(4)})
	if err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("a trial whose rank was killed twice: err = %v, want one that says how to resume", err)
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "*", "*"))
	var dir string
	for _, d := range dirs {
		if st, _ := os.Stat(d); st.IsDir() {
			dir = d
		}
	}
	if dir == "" {
		t.Fatalf("no run directory under %s", out)
	}
	// What finished before the kill was stored: trials of their own and
	// rounds of trials side by side in one job (runTogether).
	done := storedKeys(t, dir)
	if len(done) < 3 {
		t.Fatalf("%d trials stored before the kill, want at least 3", len(done))
	}
	res, err := Run(context.Background(), Config{Resume: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reused != len(done) {
		t.Fatalf("resume reused %d trials, want the %d finished ones", res.Reused, len(done))
	}
	after := storedKeys(t, dir) // fails on any duplicate
	for k := range done {
		if !after[k] {
			t.Fatalf("record %s lost", k)
		}
	}
	if left := shmLeftovers(t); len(left) > 0 {
		t.Fatalf("left in /dev/shm: %v", left)
	}
	var meta Meta
	b, _ := os.ReadFile(filepath.Join(dir, MetaFile))
	if err := json.Unmarshal(b, &meta); err != nil || meta.Plan.Name != "tiny" {
		t.Fatalf("meta.json: %v %+v", err, meta.Plan.Name)
	}
}

func TestTuneNeedsAFinishedRun(t *testing.T) {
	_, err := Tune(context.Background(), t.TempDir(), nil)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("tune of an empty directory: %v", err)
	}
}

type ioDiscard struct{}

func (ioDiscard) Write(b []byte) (int, error) { return len(b), nil }

// A budget that runs out cuts the optional rounds; the cut is on record,
// so tune replays the same decisions, and a resume measures nothing.
func TestBudgetCutIsReplayed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real rank processes")
	}
	plan := tinyPlan()
	plan.Probes = nil // keep the reserve small
	res, err := Run(context.Background(), Config{Plan: plan, Out: t.TempDir(), Budget: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "budget: optional rounds and bisection stopped") {
		t.Fatalf("notes %q: the budget did not cut", res.Notes)
	}
	first, err := profile.Load(res.ProfilePath)
	if err != nil {
		t.Fatal(err)
	}
	tuned, err := Tune(context.Background(), res.Dir, nil)
	if err != nil {
		t.Fatalf("tune of a budget-cut run: %v", err)
	}
	again, err := profile.Load(tuned.ProfilePath)
	if err != nil {
		t.Fatal(err)
	}
	if tuned.Measured != 0 || again.Hash != first.Hash {
		t.Fatalf("tune measured %d, hash %s then %s", tuned.Measured, first.Hash, again.Hash)
	}
	resumed, err := Run(context.Background(), Config{Resume: res.Dir})
	if err != nil {
		t.Fatal(err)
	}
	if resumed.Measured != 0 {
		t.Fatalf("resume of a finished run measured %d trials", resumed.Measured)
	}
}

// At the node's ranks the fragment stage also weighs mbw_mr and the depth
// stage alltoall, every rank placed by bench.PlaceRanks; the summary says
// at how many ranks, and a replay decides on what the store holds.
func TestGeometryAtTheNodesRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real rank processes")
	}
	p := tinyPlan()
	p.GeometryRanks = 4 // above this machine's cores, if it has 2: function, not speed
	p.RanksPerNode = 4
	p.Rounds, p.MaxRound = 1, 1
	p.FragmentSizes, p.Transports, p.TransportSizes = mustSizes("64K"), []string{"sm"}, mustSizes("64K")
	p.AllocPurges, p.Probes, p.VerifySizes = nil, nil, SizeList{}
	p.Parks, p.ParkSizes = []time.Duration{0, 50 * time.Microsecond}, mustSizes("64K")
	res, err := Run(t.Context(), Config{Plan: p, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]int{}
	for _, tr := range storedTrials(t, res.Dir) {
		if tr.Pattern.MultiRank() {
			if tr.Ranks != 4 || tr.Failed != "" || len(tr.Points) == 0 {
				t.Errorf("%s %s %s: ranks %d, failed %q, %d points", tr.Stage, tr.Candidate, tr.Pattern, tr.Ranks, tr.Failed, len(tr.Points))
			}
			at[tr.Stage+" "+string(tr.Pattern)]++
		}
	}
	if at["fragment mbw_mr"] != len(p.Fragments) || at["depth alltoall"] != len(p.Depths) || at["park alltoall"] != len(p.Parks) || len(at) != 3 {
		t.Errorf("multi-rank trials by stage and pattern: %v; want one per fragment, depth and park candidate", at)
	}
	// The fragment stage also weighs the smallest pipelined message, and
	// the profile says for how many ranks per node its depth was decided.
	prof, err := profile.Load(res.ProfilePath)
	if err != nil {
		t.Fatal(err)
	}
	d := prof.Decisions[profile.Intranode][profile.HostHost]
	for _, tr := range storedTrials(t, res.Dir) {
		if tr.Stage == stageFragment && !slices.Contains(tr.Sizes, 2*d.EagerLimit) {
			t.Errorf("fragment trial %s %s over %v, without twice the eager limit %d", tr.Candidate, tr.Pattern, tr.Sizes, d.EagerLimit)
		}
	}
	if d.FIFODepthRanks != p.RanksPerNode {
		t.Errorf("fifo_depth_ranks %d, want the plan's ranks per node %d", d.FIFODepthRanks, p.RanksPerNode)
	}
	// The park stage's choice is the profile's, and a candidate's.
	if d.Park != "0s" && d.Park != "50us" {
		t.Errorf("park %q, want one of the plan's 0s and 50us", d.Park)
	}
	summary, _ := os.ReadFile(filepath.Join(res.Dir, SummaryFile))
	for _, want := range []string{"## fragment (bw+mbw_mr at 4 ranks over", "## depth (msgrate+bw+alltoall at 4 ranks over", "## park (alltoall at 4 ranks over", ", park " + d.Park} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	before, _ := os.ReadFile(res.ProfilePath)
	tuned, err := Tune(t.Context(), res.Dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(tuned.ProfilePath)
	if tuned.Measured != 0 || string(before) != string(after) {
		t.Errorf("tune measured %d trials; profile re-emitted alike: %v", tuned.Measured, string(before) == string(after))
	}
}
