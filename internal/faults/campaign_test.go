package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/internal/testutil/cluster"
)

// record is one fault run, as the report keeps it.
type record struct {
	Run     int     `json:"run"`
	Kind    string  `json:"kind"`
	DelayMS int     `json:"delay_ms"` // from the command's start to the fault
	Target  string  `json:"target"`   // what was signalled ("rank 1", "command"); "" if it had finished
	Signal  string  `json:"signal,omitempty"`
	Exit    int     `json:"exit"`
	Seconds float64 `json:"seconds"`
	// Outcome says how the command ended: "failed with a clear error",
	// "finished before the fault", "resumed to the same profile", ...
	Outcome string `json:"outcome"`
	// Left are what the run left behind: processes, POSIX segments
	// (until the next gotune command removes them), temporary files.
	Left []string `json:"left,omitempty"`
	// Problem is why the run fails the campaign ("" when it does not).
	Problem string `json:"problem,omitempty"`
}

// campaign is what every run shares: the binary under test and where
// each run's files go.
type campaign struct {
	t    *testing.T
	bin  string
	root string // the module's root, where gotune is built
	tmp  string // the campaign's TMPDIR
	// tree is the command's process tree when the fault struck (launchers
	// and the ranks they started included), checked gone afterwards.
	tree []int
	// started are the pids of every command the campaign started: the
	// launchers whose pid names the segments it is answerable for.
	started map[int]bool
	// profiles are two profiles of this node with different hashes, made
	// by small sweeps when the profile kind first runs.
	profiles [2][]byte
	// hosts are the inter-node kind's two namespace-hosts (nil until it
	// first runs).
	hosts *cluster.Cluster
	// lane marks the commands of one lane of a soak of several (their
	// environment holds it; their ranks inherit it), so that what one
	// lane leaves is told from what the others are running; "" outside.
	lane string
	// cpus are the lane's CPUs, a list for --cpus ("" when not pinned).
	cpus string
}

// faultKind is a fault the campaign draws, with its weight.
type faultKind struct {
	name   string
	weight int
	run    func(c *campaign, rng *rand.Rand, rec *record)
}

// kinds are the faults the campaign draws from.
var kinds = []faultKind{
	{"bench: kill -9 a rank", 4, func(c *campaign, rng *rand.Rand, rec *record) { c.benchFault(rng, rec, syscall.SIGKILL, false) }},
	{"bench: SIGSTOP a rank", 3, func(c *campaign, rng *rand.Rand, rec *record) { c.benchFault(rng, rec, syscall.SIGSTOP, false) }},
	{"bench: kill -9 the command", 3, func(c *campaign, rng *rand.Rand, rec *record) { c.benchFault(rng, rec, syscall.SIGKILL, true) }},
	{"probe: kill -9 a rank", 2, func(c *campaign, rng *rand.Rand, rec *record) { c.probeFault(rng, rec, false) }},
	{"probe: kill -9 the command", 2, func(c *campaign, rng *rand.Rand, rec *record) { c.probeFault(rng, rec, true) }},
	{"sweep: kill -9 the command, then --resume", 1, func(c *campaign, rng *rand.Rand, rec *record) { c.sweepFault(rng, rec) }},
	{"bench auto: its profile replaced mid-start", 1, func(c *campaign, rng *rand.Rand, rec *record) { c.profileFault(rng, rec) }},
	{"bench: SIGSTOP the command, then SIGCONT", 2, func(c *campaign, rng *rand.Rand, rec *record) { c.benchPauseFault(rng, rec) }},
	{"internode: kill -9 a rank or its orted", 1, func(c *campaign, rng *rand.Rand, rec *record) { c.internodeFault(rng, rec) }},
	{"stacks: kill -9 an Open MPI rank", 1, func(c *campaign, rng *rand.Rand, rec *record) { c.stacksFault(rng, rec) }},
	{"sweep --stack: kill -9 the command amid mpirun, then --resume", 1, func(c *campaign, rng *rand.Rand, rec *record) { c.sweepStackFault(rng, rec) }},
}

// shortForm is how many kinds the short form runs, once each, in the
// order of kinds: all but the last two, the stacks kind, whose run, when
// Open MPI's mpirun hangs on a killed rank, lasts mpistack.LaunchBound (5
// minutes), and the sweep's stack tuning, which takes minutes on 2 cores.
const shortForm = 9

// TestFaultCampaign runs GOTUNE_FAULT_RUNS faults (the short form: one of
// each of the first shortForm kinds) drawn with GOTUNE_FAULT_SEED (default:
// the time) from the kinds whose names contain GOTUNE_FAULT_KIND (default:
// all), and fails on any leak, hang past a deadline, lost result or
// unclear error.
func TestFaultCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real gotune commands")
	}
	runs, err := envInt("GOTUNE_FAULT_RUNS", shortForm)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := envInt("GOTUNE_FAULT_SEED", int(time.Now().UnixNano()%1e9))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fault campaign: %d runs, seed %d (GOTUNE_FAULT_SEED=%d repeats it)", runs, seed, seed)
	c := newCampaign(t)
	report := reporter(t, "GOTUNE_FAULT_REPORT")
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	drawn := kinds
	if only := os.Getenv("GOTUNE_FAULT_KIND"); only != "" {
		// One kind, or a few: those whose names contain it.
		drawn = nil
		for _, k := range kinds {
			if strings.Contains(k.name, only) {
				drawn = append(drawn, k)
			}
		}
		if len(drawn) == 0 {
			t.Fatalf("GOTUNE_FAULT_KIND=%q names no fault kind", only)
		}
	}
	byKind := map[string]int{}
	var problems []string
	for i := range runs {
		k := drawn[i%len(drawn)] // as many runs as kinds or fewer: each in turn
		if runs > len(drawn) {
			k = drawn[pick(drawn, rng)]
		}
		rec := record{Run: i, Kind: k.name}
		c.tree = nil
		// What a killed command could not remove (a POSIX segment, its
		// bootstrap directory) is the next command's to remove: what the
		// previous run left must be gone after this one.
		before := c.files()
		began := time.Now()
		k.run(c, rng, &rec)
		rec.Seconds = time.Since(began).Seconds()
		left := c.leftProcesses()
		after := c.files()
		for _, f := range after {
			if !slices.Contains(before, f) {
				rec.Left = append(rec.Left, f+" (until the next gotune command)")
			}
		}
		var stale []string
		for _, f := range before {
			if slices.Contains(after, f) {
				stale = append(stale, f)
			}
		}
		switch {
		case len(left) > 0:
			rec.Left = append(rec.Left, left...)
			rec.Problem = join(rec.Problem, "processes left: "+strings.Join(left, ", "))
		case len(stale) > 0:
			rec.Problem = join(rec.Problem, "not removed by the next gotune command: "+strings.Join(stale, ", "))
		}
		byKind[k.name]++
		if rec.Problem != "" {
			problems = append(problems, fmt.Sprintf("run %d (%s, fault at %d ms on %s): %s", i, k.name, rec.DelayMS, rec.Target, rec.Problem))
		}
		t.Logf("run %3d %-42s fault at %5d ms on %-9s exit %3d %5.1fs %s%s", i, k.name, rec.DelayMS, or(rec.Target, "-"), rec.Exit, rec.Seconds, rec.Outcome, leftNote(rec.Left))
		report(rec)
	}
	// A segment a killed command left is the next command's to remove
	// (launch.RemoveStaleSegments): one more run must leave none.
	c.command(context.Background(), nil, "bench", "-t", "sm", "-p", "latency", "-s", "8", "--reps", "1", "--segment", "posix", "-q")
	if left := c.files(); len(left) > 0 {
		problems = append(problems, fmt.Sprintf("left after a clean run: %v", left))
	}
	t.Logf("runs by kind: %v", byKind)
	for _, p := range problems {
		t.Error(p)
	}
}

// reporter returns what appends a record as a JSON line to the file the
// environment variable env names; nothing where it names none.
func reporter(t *testing.T, env string) func(rec any) {
	path := os.Getenv(env)
	if path == "" {
		return func(any) {}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var mu sync.Mutex // a soak's lanes report at once
	return func(rec any) {
		line, _ := json.Marshal(rec) // plain data always encodes
		mu.Lock()
		defer mu.Unlock()
		if _, err := f.Write(append(line, '\n')); err != nil {
			t.Error(err)
		}
	}
}

// join appends what to problem, "; "-separated.
func join(problem, what string) string {
	return strings.TrimPrefix(problem+"; "+what, "; ")
}

// newCampaign takes the binary under test from GOTUNE_BIN, or builds it;
// the commands' temporary files go to a directory of the test's own.
func newCampaign(t *testing.T) *campaign {
	c := &campaign{t: t, root: testutil.ModuleRoot(t), bin: os.Getenv("GOTUNE_BIN"), tmp: t.TempDir()}
	if c.bin == "" {
		c.bin = filepath.Join(t.TempDir(), "gotune")
		build := exec.Command("go", "build", "-o", c.bin, "./cmd/gotune")
		build.Dir = c.root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build gotune: %v\n%s", err, out)
		}
	}
	return c
}

// benchFault runs a bandwidth ladder between two ranks through POSIX
// segments and, after a random delay, signals a rank (or the command).
// A killed rank must fail the command with an error that names the rank;
// a stopped one is a hang the watchdog reports within --stall.
func (c *campaign) benchFault(rng *rand.Rand, rec *record, sig syscall.Signal, command bool) {
	// Without the settling pass: at 4 MiB it alone can outlast a
	// 3-second deadline on a loaded 2-core machine, pause or not.
	const stall = 5 * time.Second
	args := []string{"bench", "-t", "sm", "-p", "bw", "-s", "4K:4M", "--reps", "20", "--segment", "posix",
		"--stall", stall.String(), "--timeout", "2m", "-q"}
	c.fault(rng, rec, args, sig, command, c.children, 1500*time.Millisecond, stall+30*time.Second, []string{"rank"})
}

// benchPauseFault stops the launcher of a bandwidth ladder at a random
// moment for up to twice its stall deadline, as a debugger, a job
// suspension or a paused VM would, then lets it go on: the run must end
// as it would have (its ranks never stalled), not as a hang the
// launcher's own pause made up.
func (c *campaign) benchPauseFault(rng *rand.Rand, rec *record) {
	// Without the settling pass: at 4 MiB it alone can outlast a
	// 3-second deadline on a loaded 2-core machine, pause or not.
	const stall = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), stall+2*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := c.start(ctx, &stderr, "bench", "-t", "sm", "-p", "bw", "-s", "4K:1M", "--reps", "5", "--settle", "0", "--segment", "posix",
		"--stall", stall.String(), "--timeout", "2m", "-q")
	if cmd == nil {
		rec.Problem = "could not start gotune"
		return
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	delay := time.Duration(rng.Int64N(int64(1500 * time.Millisecond)))
	pause := time.Duration(rng.Int64N(int64(2 * stall)))
	rec.DelayMS, rec.Signal = int(delay/time.Millisecond), fmt.Sprintf("SIGSTOP for %v", pause.Round(time.Millisecond))
	var err error
	select {
	case err = <-done:
		rec.Outcome = "finished before the fault"
	case <-time.After(delay):
		c.tree = descendants(cmd.Process.Pid)
		if cmd.Process.Signal(syscall.SIGSTOP) == nil {
			rec.Target = "command"
			time.Sleep(pause) // the fault's length, not a synchronisation
			_ = cmd.Process.Signal(syscall.SIGCONT)
		}
		err = <-done
	}
	rec.Exit = exitCode(err)
	switch {
	case ctx.Err() != nil:
		rec.Problem, rec.Outcome = "ran past its deadline", "killed at its deadline"
	case rec.Exit != 0:
		rec.Outcome = "failed: " + lastLine(stderr.String())
		rec.Problem = "a paused launcher failed a run whose ranks went on: " + lastLine(stderr.String())
	case rec.Outcome == "":
		rec.Outcome = "finished after the pause"
	}
}

// probeFault runs H8's safe form (a receiver computing 1.5 s while its
// sender sends, pull then push) and kills a rank or the command at a
// random moment.
func (c *campaign) probeFault(rng *rand.Rand, rec *record, command bool) {
	c.fault(rng, rec, []string{"probe", "H8", "--deadline", "500ms", "--timeout", "1m", "-q"}, syscall.SIGKILL, command,
		c.children, 3500*time.Millisecond, time.Minute, []string{"rank"})
}

// stacksFault runs gotune stacks through Open MPI and kills one of the
// reference benchmark's ranks that mpirun started: the command must fail
// naming the stack, and mpirun and its ranks must be gone.
func (c *campaign) stacksFault(rng *rand.Rand, rec *record) {
	if _, err := exec.LookPath("mpirun.openmpi"); err != nil {
		rec.Outcome = "skipped: no mpirun.openmpi"
		return
	}
	args := []string{"stacks", "--stack", "openmpi", "--reps", "3", "--latency-sizes", "8", "--bw-sizes", "4K:4M", "--settle", "0", "-q"}
	// Deadline: mpistack.LaunchBound (5 min), which ends a hung launch,
	// and the runs around it.
	c.fault(rng, rec, args, syscall.SIGKILL, false, c.anchors, 6*time.Second, 7*time.Minute, []string{"openmpi"})
}

// internodeFault runs a tcp bandwidth ladder between two namespace-hosts
// through Open MPI's mpirun (one gotune per host, as a user's job runs)
// and kills one of the job's gotune processes (a host's launcher process
// or a rank it started), or the Open MPI daemon (orted) that the
// launcher's agent started on one host: mpirun must end the job with an
// error that says what died, and nothing of the job may be left on either
// host.
func (c *campaign) internodeFault(rng *rand.Rand, rec *record) {
	// cluster.Mpirun speaks Open MPI 4's options, and Open MPI 5's daemon
	// is another (prted).
	if out, err := exec.Command("mpirun", "--version").CombinedOutput(); err != nil || !strings.Contains(string(out), "(Open MPI) 4.") {
		rec.Outcome = "skipped: mpirun is not Open MPI 4"
		return
	}
	hosts, err := c.namespaceHosts()
	if err != nil {
		rec.Outcome = "skipped: " + err.Error()
		return
	}
	dir := c.t.TempDir() // the job's working directory: its rendezvous file
	args := []string{"-np", "2", "--map-by", "node", "-x", "TMPDIR", "--wdir", dir, c.bin,
		"bench", "--launcher", "mpirun", "--nodes", "2", "-t", "tcp", "-p", "bw", "-s", "4K:1M", "--reps", "10",
		"--stall", "5s", "--timeout", "2m", "-q"}
	start := func(ctx context.Context, stderr *bytes.Buffer) *exec.Cmd {
		cmd := hosts.Mpirun(ctx, args...)
		cmd.Env = append(os.Environ(), "TMPDIR="+c.tmp)
		return c.launch(cmd, stderr)
	}
	// One run in three kills the daemon instead of a rank.
	pool, words, daemon := c.launched, []string{"rank"}, false
	if rng.IntN(3) == 0 {
		pool, words, daemon = orteds, []string{"daemon"}, true
	}
	c.faultWith(rng, rec, start, syscall.SIGKILL, false, pool, 2500*time.Millisecond, 2*time.Minute, words)
	if daemon && rec.Target == "" && rec.Outcome != "finished before the fault" {
		rec.Problem = join(rec.Problem, "no Open MPI daemon (orted) below mpirun to kill")
	}
}

// namespaceHosts are two network-namespace hosts for the campaign, brought
// up when the inter-node kind first runs and removed when it ends.
func (c *campaign) namespaceHosts() (*cluster.Cluster, error) {
	if c.hosts != nil {
		return c.hosts, nil
	}
	if err := cluster.Available(); err != nil {
		return nil, err
	}
	h, err := cluster.Up(context.Background(), cluster.Config{Hosts: 2, Slot: -1})
	if err != nil {
		return nil, err
	}
	c.hosts = h
	testutil.Release(c.t, h.Down)
	return h, nil
}

// launched are the campaign binary's processes below pid: the ranks a
// launcher started, through its daemons.
func (c *campaign) launched(pid int) []int {
	var out []int
	for _, p := range descendants(pid) {
		if exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(p), "exe")); err == nil && exe == c.bin {
			out = append(out, p)
		}
	}
	return out
}

// orteds are Open MPI's daemons below pid, each started on its host by
// mpirun's agent.
func orteds(pid int) []int {
	var out []int
	for _, p := range descendants(pid) {
		if exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(p), "exe")); err == nil && filepath.Base(exe) == "orted" {
			out = append(out, p)
		}
	}
	return out
}

// fault starts gotune with args, signals a random rank (or the command)
// within the first maxDelay, and judges the end: within deadline, and,
// when a rank was hit while the command ran, a failure whose message has
// each of words.
func (c *campaign) fault(rng *rand.Rand, rec *record, args []string, sig syscall.Signal, command bool, ranks func(int) []int, maxDelay, deadline time.Duration, words []string) {
	start := func(ctx context.Context, stderr *bytes.Buffer) *exec.Cmd {
		return c.start(ctx, stderr, args...)
	}
	c.faultWith(rng, rec, start, sig, command, ranks, maxDelay, deadline, words)
}

// faultWith is fault with the command start starts (c.launch), bound to
// ctx, its stderr to the buffer; nil when it could not start.
func (c *campaign) faultWith(rng *rand.Rand, rec *record, start func(context.Context, *bytes.Buffer) *exec.Cmd, sig syscall.Signal, command bool, ranks func(int) []int, maxDelay, deadline time.Duration, words []string) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var stderr bytes.Buffer
	cmd := start(ctx, &stderr)
	if cmd == nil {
		rec.Problem = "could not start gotune"
		return
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	delay := time.Duration(rng.Int64N(int64(maxDelay)))
	rec.DelayMS, rec.Signal = int(delay/time.Millisecond), sig.String()
	var err error
	select {
	case err = <-done:
		rec.Outcome = "finished before the fault"
	case <-time.After(delay):
		// The first moment after the delay at which there is a process to
		// hit (the ranks may not have started yet; gotune stacks runs the
		// anchor only in its turns).
		for wait := time.Now().Add(15 * time.Second); ; {
			if rec.Target = c.signal(rng, cmd.Process.Pid, sig, command, ranks); rec.Target != "" || time.Now().After(wait) {
				break
			}
			select {
			case err = <-done:
				rec.Outcome = "finished before the fault"
			case <-time.After(20 * time.Millisecond): // polling for a target, not a synchronisation
				continue
			}
			break
		}
		if rec.Outcome == "" {
			if rec.Target == "" {
				rec.Outcome = "no process to signal within 15 s of the fault: ran to its end"
			}
			err = <-done
		}
	}
	rec.Exit = exitCode(err)
	switch {
	case ctx.Err() != nil:
		rec.Problem = fmt.Sprintf("ran past its %v deadline", deadline)
		rec.Outcome = "killed at its deadline"
	case rec.Target == "":
		if rec.Exit != 0 {
			rec.Problem = "failed without a fault: " + lastLine(stderr.String())
		}
	case command:
		rec.Outcome = "command killed"
	case rec.Exit == 0:
		rec.Outcome = "finished: the rank had finished its part"
	default:
		rec.Outcome = "failed: " + lastLine(stderr.String())
		for _, w := range words {
			if !strings.Contains(stderr.String(), w) {
				rec.Problem = fmt.Sprintf("its error does not say %q: %s", w, lastLine(stderr.String()))
			}
		}
	}
}

// sweepFault runs a small sweep, kills it at a random moment, resumes it,
// and checks that gotune tune re-emits the profile the resumed run wrote.
func (c *campaign) sweepFault(rng *rand.Rand, rec *record) {
	c.sweepKilled(rng, rec, "")
}

// sweepStackFault is sweepFault with the stack tuner of Open MPI in the
// sweep, killed while a launcher run of it has ranks up (mpirun and the
// reference benchmark's ranks: they must go with the sweep).
func (c *campaign) sweepStackFault(rng *rand.Rand, rec *record) {
	if _, err := exec.LookPath("mpirun.openmpi"); err != nil {
		rec.Outcome = "skipped: no mpirun.openmpi"
		return
	}
	c.sweepKilled(rng, rec, "openmpi")
}

// stackPlan cuts a stack's tuning to what a fault run affords.
const stackPlan = `stack_rounds: 4
stack_iters: 5
`

// sweepKilled kills a small sweep (tuning stack too, unless "") at a
// random moment, resumes it and checks what it emits against tune.
func (c *campaign) sweepKilled(rng *rand.Rand, rec *record, stack string) {
	dir := c.t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	args := []string{"sweep", "--plan", plan, "--out", filepath.Join(dir, "results"), "--no-report", "-q"}
	text := smallPlan
	if stack != "" {
		text += stackPlan
		args = append(args, "--stack", stack)
	}
	if err := os.WriteFile(plan, []byte(text), 0o644); err != nil {
		rec.Problem = err.Error()
		return
	}
	out := filepath.Join(dir, "results")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := c.start(ctx, &stderr, args...)
	if cmd == nil {
		rec.Problem = "could not start gotune"
		return
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Without a stack the sweep takes 10-15 s here; with one, the kill
	// comes within 3 s of the first moment a launcher run has ranks up.
	delay := time.Duration(rng.Int64N(int64(12 * time.Second)))
	if stack != "" {
		delay = time.Duration(rng.Int64N(int64(3 * time.Second)))
	}
	rec.DelayMS, rec.Signal = int(delay/time.Millisecond), "SIGKILL"
	var err error
	select {
	case err = <-done:
	case <-c.after(cmd.Process.Pid, stack != "", delay):
		rec.Target = c.signal(rng, cmd.Process.Pid, syscall.SIGKILL, true, nil)
		err = <-done
	}
	rec.Exit = exitCode(err)
	var runs []string
	metas, _ := filepath.Glob(filepath.Join(out, "*", "*", "meta.json"))
	for _, m := range metas {
		runs = append(runs, filepath.Dir(m))
	}
	switch {
	case rec.Target == "" && rec.Exit != 0:
		rec.Problem = "the sweep failed without a fault: " + lastLine(stderr.String())
		return
	case rec.Target == "":
		rec.Outcome = "finished before the fault"
	case len(runs) == 0:
		rec.Outcome = "killed before its run directory existed"
		return
	default:
		var resumeErr bytes.Buffer
		if code := c.command(ctx, &resumeErr, "sweep", "--resume", runs[0], "--no-report", "-q"); code != 0 {
			rec.Problem = fmt.Sprintf("--resume %s exited %d: %s", runs[0], code, lastLine(resumeErr.String()))
			return
		}
		rec.Outcome = "resumed"
	}
	if len(runs) != 1 {
		rec.Problem = fmt.Sprintf("%d run directories under %s", len(runs), out)
		return
	}
	emitted, err := os.ReadFile(filepath.Join(runs[0], "profile.yaml"))
	if err != nil {
		rec.Problem = "no profile: " + err.Error()
		return
	}
	var tuneErr bytes.Buffer
	if code := c.command(ctx, &tuneErr, "tune", runs[0]); code != 0 {
		rec.Problem = fmt.Sprintf("tune exited %d: %s", code, lastLine(tuneErr.String()))
		return
	}
	tuned, err := os.ReadFile(filepath.Join(runs[0], "profile.yaml"))
	if err != nil || !bytes.Equal(withoutComments(emitted), withoutComments(tuned)) {
		rec.Problem = "tune re-emitted another profile from the store"
		return
	}
	rec.Outcome += "; tune re-emitted the same profile"
	if stack != "" {
		if _, err := os.Stat(filepath.Join(runs[0], "native", "openmpi-mca-params.conf")); err != nil {
			rec.Problem = "no Open MPI file after the resume: " + err.Error()
		}
	}
}

// after fires delay after the sweep pid starts, or, with ranks, delay
// after a launcher run of its first has the reference benchmark's ranks
// up (polled; never if none comes).
func (c *campaign) after(pid int, ranks bool, delay time.Duration) <-chan time.Time {
	if !ranks {
		return time.After(delay)
	}
	fire := make(chan time.Time, 1)
	go func() {
		for len(c.anchors(pid)) == 0 {
			if state(pid) == '?' || state(pid) == 'Z' {
				return // the sweep ended first
			}
			time.Sleep(20 * time.Millisecond) // polling for the ranks to appear, not a synchronisation
		}
		fire <- <-time.After(delay)
	}()
	return fire
}

// profileFault starts gotune bench -t auto with a profile and, at a
// random moment of its start, replaces the file (an atomic rename) with
// another profile of the node: either the launcher and its ranks loaded
// the same file (the run ends well) or the ranks refuse the changed one,
// with an error saying so; neither a crash, a hang nor a rank routing by
// another profile than its launcher's.
func (c *campaign) profileFault(rng *rand.Rand, rec *record) {
	if c.profiles[0] == nil {
		for i := range c.profiles {
			if c.profiles[i] = c.sweepProfile(); c.profiles[i] == nil {
				rec.Problem = "no profile to run by: the small sweep failed"
				return
			}
		}
		if bytes.Equal(c.profiles[0], c.profiles[1]) {
			rec.Problem = "two sweeps wrote the same profile: nothing to replace it with"
			return
		}
	}
	dir := c.t.TempDir()
	path := filepath.Join(dir, "profile.yaml")
	if err := os.WriteFile(path, c.profiles[0], 0o644); err != nil {
		rec.Problem = err.Error()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := c.start(ctx, &stderr, "bench", "-t", "auto", "--profile", path, "-p", "bw", "-s", "4K:256K", "--reps", "3", "-q")
	if cmd == nil {
		rec.Problem = "could not start gotune"
		return
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	delay := time.Duration(rng.Int64N(int64(400 * time.Millisecond)))
	rec.DelayMS, rec.Signal = int(delay/time.Millisecond), "rename"
	var err error
	select {
	case err = <-done:
		rec.Outcome = "finished before the fault"
	case <-time.After(delay):
		tmp := filepath.Join(dir, ".profile.yaml.new")
		if err := os.WriteFile(tmp, c.profiles[1], 0o644); err == nil && os.Rename(tmp, path) == nil {
			rec.Target = "profile"
		}
		err = <-done
	}
	rec.Exit = exitCode(err)
	switch {
	case ctx.Err() != nil:
		rec.Problem, rec.Outcome = "ran past its 1m deadline", "killed at its deadline"
	case rec.Exit == 0 && rec.Outcome == "":
		rec.Outcome = "finished: the launcher and its ranks loaded one profile"
	case rec.Exit == 0:
	case strings.Contains(stderr.String(), "the file changed"):
		rec.Outcome = "refused: " + lastLine(stderr.String())
	default:
		rec.Outcome = "failed: " + lastLine(stderr.String())
		rec.Problem = "failed otherwise than refusing the changed profile: " + lastLine(stderr.String())
	}
}

// sweepProfile runs the small sweep and returns the profile it wrote
// (nil if it failed).
func (c *campaign) sweepProfile() []byte {
	dir := c.t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte(smallPlan), 0o644); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if c.command(ctx, nil, "sweep", "--plan", plan, "--out", dir, "--no-report", "-q") != 0 {
		return nil
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*", "*", "profile.yaml"))
	if len(paths) != 1 {
		return nil
	}
	b, _ := os.ReadFile(paths[0])
	return b
}

// smallPlan is a sweep of one candidate per geometry stage, sm and cma,
// H5 and a verification: every phase, in about half a minute.
const smallPlan = `budget: 2m
rounds: 1
max_rounds: 1
eager: ["4K"]
eager_sizes: "4K"
fragments: ["64Kx64"]
fragment_sizes: "64K"
depths: [64]
depth_sizes: "8"
confirm_sizes: ""
transports: ["sm", "cma"]
transport_sizes: "64K:256K"
ladder_step: 2
bisect: false
alloc_purges: []
probes: ["H5"]
verify_sizes: "64K"
verify_rounds: 1
`

// start runs gotune with args, its temporary files in the run's own
// directory (c.tmp, checked empty afterwards).
func (c *campaign) start(ctx context.Context, stderr *bytes.Buffer, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = append(os.Environ(), "GOTUNE_BOOTSTRAP_ADDR=127.0.0.1", "TMPDIR="+c.tmp)
	if c.lane != "" {
		cmd.Env = append(cmd.Env, c.lane)
	}
	return c.launch(cmd, stderr)
}

// launch starts cmd (its environment set) with stderr into the buffer,
// killed at its context's end, as a command the campaign is answerable
// for; nil when it could not start.
func (c *campaign) launch(cmd *exec.Cmd, stderr *bytes.Buffer) *exec.Cmd {
	cmd.Stdout, cmd.Stderr = nil, stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		c.t.Log(err)
		return nil
	}
	c.own(cmd.Process.Pid)
	return cmd
}

// own records pid as a command the campaign started.
func (c *campaign) own(pid int) {
	if c.started == nil {
		c.started = map[int]bool{}
	}
	c.started[pid] = true
}

// command runs gotune with args to its end and returns its exit code.
func (c *campaign) command(ctx context.Context, stderr *bytes.Buffer, args ...string) int {
	if stderr == nil {
		stderr = &bytes.Buffer{}
	}
	cmd := c.start(ctx, stderr, args...)
	if cmd == nil {
		return -1
	}
	return exitCode(cmd.Wait())
}

// signal sends sig to the command (pid) or to one of its rank processes,
// chosen at random, and says which; "" when no rank was running.
func (c *campaign) signal(rng *rand.Rand, pid int, sig syscall.Signal, command bool, pool func(int) []int) string {
	c.tree = descendants(pid)
	if command {
		if p, err := os.FindProcess(pid); err == nil && p.Signal(sig) == nil {
			return "command"
		}
		return ""
	}
	ranks := pool(pid)
	if len(ranks) == 0 {
		return ""
	}
	target := ranks[rng.IntN(len(ranks))]
	what := "rank"
	if exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(target), "exe")); err == nil && exe != c.bin {
		what = filepath.Base(exe) // a launcher's daemon, say
	}
	p, err := os.FindProcess(target)
	if err != nil || p.Signal(sig) != nil {
		return ""
	}
	if sig == syscall.SIGSTOP {
		// A stopped rank is the watchdog's to kill; should it not, the
		// leak check finds it. Continue it then, so it can die.
		c.t.Cleanup(func() { _ = p.Signal(syscall.SIGCONT) })
	}
	return what + " pid " + strconv.Itoa(target)
}

// children are the processes of the campaign's binary whose parent is pid.
func (c *campaign) children(pid int) []int {
	var out []int
	for _, p := range c.ours() {
		if ppid(p) == pid {
			out = append(out, p)
		}
	}
	return out
}

// anchors are the reference benchmark's ranks below pid (mpirun's
// children, running the anchor gotune stacks built).
func (c *campaign) anchors(pid int) []int {
	var out []int
	for _, p := range descendants(pid) {
		if exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(p), "exe")); err == nil && filepath.Base(exe) == "anchor" {
			out = append(out, p)
		}
	}
	return out
}

// descendants are the live processes below pid.
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if p, err := strconv.Atoi(e.Name()); err == nil {
			parent[p] = ppid(p)
		}
	}
	var out []int
	frontier := []int{pid}
	for len(frontier) > 0 {
		var next []int
		for p, pp := range parent {
			if slices.Contains(frontier, pp) {
				out = append(out, p)
				next = append(next, p)
			}
		}
		frontier = next
	}
	return out
}

// ours are the live processes running the campaign's binary.
func (c *campaign) ours() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if c.mine(pid) && state(pid) != 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// mine says whether pid runs the campaign's gotune (in its lane, if it
// has one).
func (c *campaign) mine(pid int) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	if exe, err := os.Readlink(filepath.Join(dir, "exe")); err != nil || exe != c.bin {
		return false
	}
	if c.lane == "" {
		return true
	}
	env, err := os.ReadFile(filepath.Join(dir, "environ"))
	return err == nil && slices.Contains(strings.Split(string(env), "\x00"), c.lane)
}

// forLane returns a campaign for lane l of a soak, its commands marked and
// their ranks on cpus, its temporary files in a directory of its own.
func (c *campaign) forLane(l int, cpus []int) *campaign {
	list := make([]string, len(cpus))
	for i, cpu := range cpus {
		list[i] = strconv.Itoa(cpu)
	}
	return &campaign{t: c.t, bin: c.bin, root: c.root, tmp: c.t.TempDir(),
		lane: fmt.Sprintf("GOTUNE_SOAK_LANE=%d", l), cpus: strings.Join(list, ",")}
}

// laneCPUs is the --cpus list of n ranks on the lane's CPUs, a rank a
// CPU while they last, then round again.
func (c *campaign) laneCPUs(n int) string {
	cpus := strings.Split(c.cpus, ",")
	list := make([]string, n)
	for r := range list {
		list[r] = cpus[r%len(cpus)]
	}
	return strings.Join(list, ",")
}

// leftProcesses waits up to 10 s for the campaign's processes to end
// (a killed command's ranks die with it) and be reaped, then names those
// left, killing the live ones.
func (c *campaign) leftProcesses() []string {
	alive := func() []int {
		pids := c.ours()
		for _, p := range c.tree {
			if s := state(p); s != '?' && s != 'Z' && !slices.Contains(pids, p) {
				pids = append(pids, p)
			}
		}
		return pids
	}
	// A dead process of the tree is gone once its parent (or init, for an
	// orphan) reaps it; until then its pid keeps its bootstrap directory
	// from counting as stale (launch.RemoveStaleBootDirs).
	unreaped := func() []int {
		var pids []int
		for _, p := range c.tree {
			if state(p) == 'Z' {
				pids = append(pids, p)
			}
		}
		return pids
	}
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) && len(alive())+len(unreaped()) > 0 {
		time.Sleep(50 * time.Millisecond) // polling for exits, with a deadline: not a synchronisation
	}
	var left []string
	for _, pid := range alive() {
		left = append(left, fmt.Sprintf("process %d (state %c)", pid, state(pid)))
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Signal(syscall.SIGKILL)
			_ = p.Signal(syscall.SIGCONT)
		}
	}
	for _, pid := range unreaped() {
		left = append(left, fmt.Sprintf("process %d (dead, not reaped by its parent %d)", pid, ppid(pid)))
	}
	return left
}

// launchedBy says whether the POSIX segment name was created by a
// launcher of the campaign: a command it started, a process of a tree it
// signalled, or a live process of its binary. Tests of other packages
// run beside it with segments of their own.
func (c *campaign) launchedBy(name string) bool {
	if !strings.HasPrefix(name, launch.ShmPrefix) {
		return false
	}
	pid, ok := launch.SegmentLauncher(name)
	if !ok {
		return true // not a launcher's name: nobody else's either
	}
	if c.started[pid] || slices.Contains(c.tree, pid) {
		return true
	}
	return c.mine(pid)
}

// files are the POSIX segments under /dev/shm that the campaign's
// launchers created and what is in its temporary directory (bootstrap
// directories and the like).
func (c *campaign) files() []string {
	var out []string
	entries, _ := os.ReadDir(launch.ShmDir)
	for _, e := range entries {
		if c.launchedBy(e.Name()) {
			out = append(out, "segment "+e.Name())
		}
	}
	entries, _ = os.ReadDir(c.tmp)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "ompi.") {
			// Open MPI's session directory, shared by every mpirun of the
			// user and managed by Open MPI: an mpirun ended by
			// mpistack.LaunchBound leaves it (docs/reliability.md).
			continue
		}
		out = append(out, "temporary "+e.Name())
	}
	return out
}

// stat fields of /proc/PID/stat after the command name.
func statFields(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	_, rest, ok := bytes.Cut(b, []byte(") "))
	if !ok {
		return nil
	}
	return strings.Fields(string(rest))
}

func ppid(pid int) int {
	f := statFields(pid)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

func state(pid int) byte {
	f := statFields(pid)
	if len(f) < 1 || f[0] == "" {
		return '?'
	}
	return f[0][0]
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		return -1
	}
}

// lastLine is the line of a command's stderr that says why it failed:
// its last "gotune: " line (a launcher's report may follow it, and a
// launched job's header comes before it), else the last.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for _, l := range slices.Backward(lines) {
		if strings.HasPrefix(l, "gotune: ") {
			return l
		}
	}
	return lines[len(lines)-1]
}

func withoutComments(b []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(l, []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func leftNote(left []string) string {
	if len(left) == 0 {
		return ""
	}
	return "; left: " + strings.Join(left, ", ")
}

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// pick draws an index of from by weight.
func pick(from []faultKind, rng *rand.Rand) int {
	total := 0
	for _, k := range from {
		total += k.weight
	}
	n := rng.IntN(total)
	for i, k := range from {
		if n < k.weight {
			return i
		}
		n -= k.weight
	}
	return len(from) - 1
}

func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a positive integer", name, v)
	}
	return n, nil
}

// A segment is the campaign's when a launcher it started or signalled
// named it; another package's test process (this one, here) is not.
func TestSegmentsOfOtherJobsAreNotTheCampaigns(t *testing.T) {
	c := &campaign{t: t, bin: "/nonexistent/gotune", started: map[int]bool{41: true}, tree: []int{43}}
	for _, tc := range []struct {
		name string
		want bool
	}{
		{launch.ShmPrefix + "41-b10d90d680b6", true},
		{launch.ShmPrefix + "43-b10d90d680b6", true},
		{fmt.Sprintf("%s%d-b10d90d680b6", launch.ShmPrefix, os.Getpid()), false},
		{launch.ShmPrefix + "odd", true},
		{"psm2.shm", false},
	} {
		if got := c.launchedBy(tc.name); got != tc.want {
			t.Errorf("launchedBy(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
