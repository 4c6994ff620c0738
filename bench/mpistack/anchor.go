package mpistack

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
)

//go:embed csrc/anchor.c
var source []byte

// defaultRanks is how many processes the anchor runs unless a Stack says
// otherwise: every pattern but flood needs exactly two.
const defaultRanks = 2

// Stack is an MPI stack configuration to measure through. A tuned file is
// measured as the stack loads it in production, as a file: Env names it
// (OMPI_MCA_mca_base_param_files=FILE) or carries its lines (MPICH's
// MPIR_CVAR_*, UCX_*, LD_PRELOAD and MIMALLOC_*), never Args.
type Stack struct {
	Name string // label, e.g. "openmpi vader cma"
	// Family is the MPI library and the GOTUNE_REQUIRE capability a
	// missing stack names: "openmpi" (the default) or "mpich".
	Family string
	MPICC  string   // compiler wrapper, default "mpicc"
	MPIRun string   // launcher, default "mpirun"
	Args   []string // extra launcher args, e.g. placement and MCA settings
	// Env is added to the launcher's environment (KEY=VALUE), which both
	// launchers pass on to the ranks; it overrides the same keys there.
	Env []string
	// Ranks is the number of processes (0: 2) of the flood pattern; mbw_mr
	// and alltoall run with the Spec's Ranks.
	Ranks int
}

// OpenMPIVader returns the Open MPI ob1/vader configuration with the given
// single-copy mechanism ("cma" or "none"): only the self and vader BTLs, each
// rank bound to its own core. Open MPI only warns about a mechanism it does
// not know and then uses its default (CMA where the kernel allows it).
func OpenMPIVader(singleCopy string) Stack {
	return Stack{
		Name: "openmpi vader " + singleCopy,
		Args: []string{
			"--mca", "pml", "ob1",
			"--mca", "btl", "self,vader",
			"--mca", "btl_vader_single_copy_mechanism", singleCopy,
			"--map-by", "core", "--bind-to", "core",
		},
	}
}

// OpenMPI returns Open MPI by its explicit Debian names (mpicc.openmpi,
// mpirun.openmpi, whatever the mpirun alternative points at) with ob1 over
// the self and vader BTLs, rank i bound to core i mod cores (more ranks than
// cores are allowed for the flood), then args. Settings given here or in
// Env override a param file's (Open MPI's precedence: command line, then
// environment, then files), so a tuned file cannot change pml or btl here.
func OpenMPI(name string, args ...string) Stack {
	s := OpenMPIFile(name)
	s.Args = append(append([]string{"--mca", "pml", "ob1"}, s.Args...), args...)
	return s
}

// OpenMPIFile is OpenMPI as a tuned params file configures it: the self
// and vader BTLs pinned (the node's network BTLs are not what is tuned
// here), the pml left to the file and to Open MPI's own selection.
func OpenMPIFile(name string) Stack {
	return Stack{
		Name:   name,
		Family: "openmpi",
		MPICC:  "mpicc.openmpi",
		MPIRun: "mpirun.openmpi",
		Args: []string{
			"--mca", "btl", "self,vader",
			"--oversubscribe", "--map-by", "core", "--bind-to", "core:overload-allowed",
		},
	}
}

// selectedPML is pml_base_verbose's line naming the pml a rank selected.
var selectedPML = regexp.MustCompile(`select: component (\S+) selected`)

// SelectedPML runs one 8-byte ping-pong through Open MPI stack s and
// returns the pml its ranks selected (ob1, ucx, cm). Like every launch it
// is bounded by LaunchBound.
func SelectedPML(ctx context.Context, s Stack, binary string) (string, error) {
	launcher, err := exec.LookPath(s.mpirun())
	if err != nil {
		return "", sys.NotSupported(s.family(), s.mpirun()+" not found in PATH", err)
	}
	args := append([]string{"-np", "2"}, s.Args...)
	args = append(args, "--mca", "pml_base_verbose", "10", binary, string(bench.Latency), "8", "1", "1", "1", "1")
	var out bytes.Buffer
	cmd, err := runLaunch(ctx, s, launcher, args, func(cmd *exec.Cmd) { cmd.Stdout, cmd.Stderr = &out, &out })
	if err != nil {
		return "", fmt.Errorf("which pml %s selects: %s: %w%s", s.Name, strings.Join(cmd.Args, " "), err, indentOutput(tail(out.Bytes())))
	}
	m := selectedPML.FindSubmatch(out.Bytes())
	if m == nil {
		return "", fmt.Errorf("which pml %s selects: no \"component ... selected\" line in its verbose output%s", s.Name, indentOutput(tail(out.Bytes())))
	}
	return string(m[1]), nil
}

// MPICH returns MPICH by its Debian names (mpicc.mpich, mpirun.mpich):
// Hydra starting the ranks on this host by fork, no ssh, rank i bound to
// core i mod cores (-bind-to core, round-robin over the cores).
func MPICH(name string) Stack {
	return Stack{
		Name:   name,
		Family: "mpich",
		MPICC:  "mpicc.mpich",
		MPIRun: "mpirun.mpich",
		Args:   []string{"-launcher", "fork", "-bind-to", "core"},
	}
}

func (s Stack) mpicc() string  { return cmp.Or(s.MPICC, "mpicc") }
func (s Stack) mpirun() string { return cmp.Or(s.MPIRun, "mpirun") }
func (s Stack) family() string { return cmp.Or(s.Family, "openmpi") }
func (s Stack) ranks() int     { return cmp.Or(s.Ranks, defaultRanks) }

// Build compiles anchor.c with the stack's mpicc into dir and returns the
// binary path. A missing compiler wrapper matches sys.ErrNotSupported.
func Build(ctx context.Context, s Stack, dir string) (string, error) {
	cc, err := exec.LookPath(s.mpicc())
	if err != nil {
		return "", fmt.Errorf("build anchor with %s: %w", s.Name,
			sys.NotSupported(s.family(), s.mpicc()+" not found in PATH", err))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build anchor with %s: %w", s.Name, err)
	}
	src, bin := filepath.Join(dir, "anchor.c"), filepath.Join(dir, "anchor")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", fmt.Errorf("build anchor with %s: %w", s.Name, err)
	}
	out, err := exec.CommandContext(ctx, cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-o", bin, src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build anchor with %s: %s: %w%s", s.Name, cc, err, indentOutput(out))
	}
	return bin, nil
}

// The stack hazards of issue 28, patterns of anchor.c beyond bench's: both
// report MB/s moved by rank 0 and take every Spec field Run takes.
const (
	// HeadToHead: both ranks post a window of receives and then of sends
	// (on every other iteration the sends first), as bibw: 2 ranks.
	HeadToHead bench.Pattern = "h2h"
	// Flood: every rank but 0 sends a window to rank 0: Stack.Ranks ranks.
	Flood bench.Pattern = "flood"
)

// Errors of a run that the tuner tells apart (errors.Is): a configuration
// whose run hangs or corrupts is quarantined, one that crashes too, with
// its reason.
var (
	// ErrHang: the run was still going at its context's deadline; the
	// launcher and its ranks were killed.
	ErrHang = errors.New("hang: the run passed its deadline")
	// ErrCorrupt: a rank received a payload that differs from what was
	// sent (Spec.Validate).
	ErrCorrupt = errors.New("corrupted payload")
	// ErrCrash: the launcher or a rank failed otherwise (Check only; Run's
	// own errors say what failed).
	ErrCrash = errors.New("crash")
)

// Run measures spec through the stack with a binary from Build and returns a
// result labelled with the stack's name, one point per size summarized by
// bench.Summarize, and the MPI library's version in the provenance.
//
// Of spec it uses Pattern (bench's but multi_lat and incast, or HeadToHead
// or Flood; alloc mallocs and frees every message's buffer in the ranks,
// see anchor.c), Ranks (mbw_mr and alltoall: the launcher starts that
// many, placed as the Stack's arguments say), Sizes, Reps (0: bench.DefaultReps), Iters and Warmup (0: OSU's counts for
// each size), Window (0: bench.DefaultWindow) and Validate (every received
// byte checked; a bad one is ErrCorrupt); the result's Spec records those,
// with Transport set to the stack's name. Transport options, CPUs and
// segment backends belong to gotune's transports: placement is the
// launcher's (see OpenMPI). A run still going at ctx's deadline or at
// LaunchBound is ErrHang (and context.DeadlineExceeded). A missing
// launcher is sys.ErrNotSupported.
func Run(ctx context.Context, s Stack, binary string, spec bench.Spec) (bench.Result, error) {
	if multiRank(spec.Pattern) {
		s.Ranks = spec.RankCount()
	}
	spec, err := resolve(s, spec)
	if err != nil {
		return bench.Result{}, fmt.Errorf("run anchor through %s: %w", s.Name, err)
	}
	launcher, err := exec.LookPath(s.mpirun())
	if err != nil {
		return bench.Result{}, fmt.Errorf("run anchor through %s: %w", s.Name,
			sys.NotSupported(s.family(), s.mpirun()+" not found in PATH", err))
	}
	prov := hostinfo.Collect("/")
	libs, err := libraryVersion(ctx, s, launcher)
	if err != nil {
		return bench.Result{}, fmt.Errorf("run anchor through %s: %w", s.Name, err)
	}
	prov.Libraries = libs

	sizes := make([]string, len(spec.Sizes))
	for i, n := range spec.Sizes {
		sizes[i] = strconv.Itoa(n)
	}
	validate := "0"
	if spec.Validate {
		validate = "1"
	}
	args := append([]string{"-np", strconv.Itoa(s.ranks())}, s.Args...)
	args = append(args, binary, string(spec.Pattern), strings.Join(sizes, ","),
		strconv.Itoa(spec.Reps), strconv.Itoa(spec.Iters), strconv.Itoa(spec.Warmup), strconv.Itoa(spec.Window), validate)
	report, err := launch.TempFile("anchor") // named for this process: the next launch removes it if gotune is killed
	if err != nil {
		return bench.Result{}, fmt.Errorf("run anchor through %s: %w", s.Name, err)
	}
	report.Close()
	defer os.Remove(report.Name())
	var stdout, stderr bytes.Buffer
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	if spec.Validate { // the anchor reports bad bytes only when it checks them
		go endAfterReport(runCtx, stopRun, report.Name())
	}
	cmd, err := runLaunch(runCtx, s, launcher, args, func(cmd *exec.Cmd) {
		cmd.Env = append(cmd.Env, "GOTUNE_ANCHOR_REPORT="+report.Name())
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
	})
	if err != nil {
		if errors.Is(err, ErrHang) {
			return bench.Result{}, fmt.Errorf("run anchor through %s: %s %v: %w%s", s.Name,
				spec.Pattern, spec.Sizes, err, indentOutput(tail(stdout.Bytes())))
		}
		if ctx.Err() != nil {
			return bench.Result{}, fmt.Errorf("run anchor through %s: %w", s.Name, ctx.Err())
		}
		if errors.Is(context.Cause(runCtx), errAbortStalled) {
			err = fmt.Errorf("%w, ended after %v (%w)", errAbortStalled, abortGrace, err)
		}
		out := stderr.Bytes()
		if len(bytes.TrimSpace(out)) == 0 {
			out = stdout.Bytes()
		}
		reported, _ := os.ReadFile(report.Name()) // unreadable: judge by stderr alone
		if m := mismatch.Find(append(reported, stderr.Bytes()...)); m != nil {
			return bench.Result{}, fmt.Errorf("run anchor through %s: %w: %s: %s: %w%s", s.Name,
				ErrCorrupt, m, strings.Join(cmd.Args, " "), err, indentOutput(tail(out)))
		}
		return bench.Result{}, fmt.Errorf("run anchor through %s: %s: %w%s",
			s.Name, strings.Join(cmd.Args, " "), err, indentOutput(tail(out)))
	}

	out, err := parseOutput(&stdout, spec.Sizes, spec.Reps)
	if err != nil {
		return bench.Result{}, fmt.Errorf("run anchor through %s: %w", s.Name, err)
	}
	res := bench.Result{Label: s.Name, Provenance: prov, Spec: spec}
	for _, o := range out {
		iters, warmup := bench.DefaultIters(spec.Pattern, o.size)
		iters, warmup = cmp.Or(spec.Iters, iters), cmp.Or(spec.Warmup, warmup)
		if o.iters != iters || o.warmup != warmup {
			return bench.Result{}, fmt.Errorf("run anchor through %s: size %d ran %d iterations after %d warm-up, want %d after %d",
				s.Name, o.size, o.iters, o.warmup, iters, warmup)
		}
		p := bench.Summarize(o.size, spec.Pattern.Unit(), o.reps, o.perIter)
		p.Iters, p.Warmup = o.iters, o.warmup
		p.Validated = spec.Validate
		res.Points = append(res.Points, p)
	}
	return res, nil
}

// abortGrace is how long a job whose rank reported a bad payload has to
// end by itself (MPI_Abort) before it is ended. Why: MPICH 4.0.2's
// MPI_Abort was seen to leave its job running until the launch's
// deadline on a loaded 2-core machine, which read as a hang.
const abortGrace = 3 * time.Second

// errAbortStalled ends a job whose abort did not end it within abortGrace.
var errAbortStalled = errors.New("the job did not end after a rank's abort")

// endAfterReport watches anchor.c's report file (polled: a rank writes it
// just before MPI_Abort) and, abortGrace after a report appears, cancels
// the job with errAbortStalled; it returns when ctx ends.
func endAfterReport(ctx context.Context, stop context.CancelCauseFunc, report string) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if st, err := os.Stat(report); err == nil && st.Size() > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(abortGrace):
				stop(errAbortStalled)
			}
			return
		}
	}
}

// LaunchBound bounds one launch of a stack's launcher (one repetition of
// a ladder; runLaunch): one still running then is a hang (ErrHang). Why: Open MPI's
// mpirun was seen waiting on, for minutes, after a rank was killed early
// in a run (docs/reliability.md), and a user's job has its own deadline
// only at the end (gotune stacks --timeout, an hour). A ladder's launch
// takes seconds; a minute is the slowest seen on a loaded 2-core machine.
var LaunchBound = 5 * time.Minute

// mismatch is anchor.c's report of a bad payload byte (its first line).
var mismatch = regexp.MustCompile(`anchor rank \d+: payload mismatch: [^\n]*`)

// resolve checks spec and fills in its defaults; what the anchor does not use
// is dropped so the recorded spec says what ran.
func resolve(s Stack, spec bench.Spec) (bench.Spec, error) {
	switch spec.Pattern {
	case HeadToHead, Flood:
	default:
		p, err := bench.ParsePattern(string(spec.Pattern))
		if err != nil {
			return spec, err
		}
		spec.Pattern = p
	}
	switch n := s.ranks(); {
	case spec.Pattern == bench.MultiLatency || spec.Pattern == bench.Incast || spec.Pattern.Collective():
		return spec, fmt.Errorf("%s: the anchor has no such pattern (mbw_mr and alltoall it has)", spec.Pattern)
	case spec.Pattern == bench.MultiBandwidth && (n < 2 || n%2 != 0):
		return spec, fmt.Errorf("%s with %d ranks: it pairs the ranks, so it takes an even number", spec.Pattern, n)
	case (spec.Pattern == Flood || spec.Pattern == bench.AllToAll) && n < 2,
		spec.Pattern != Flood && !multiRank(spec.Pattern) && n != 2:
		return spec, fmt.Errorf("%s with %d ranks (flood and alltoall take 2 or more, mbw_mr an even number, every other pattern 2)", spec.Pattern, n)
	}
	if len(spec.Sizes) == 0 {
		return spec, errors.New("no message sizes")
	}
	for _, n := range spec.Sizes {
		if n < 0 {
			return spec, fmt.Errorf("negative message size %d", n)
		}
	}
	if spec.Reps < 0 || spec.Iters < 0 || spec.Warmup < 0 || spec.Window < 0 {
		return spec, fmt.Errorf("negative reps (%d), iters (%d), warmup (%d) or window (%d)",
			spec.Reps, spec.Iters, spec.Warmup, spec.Window)
	}
	ranks := 0
	if multiRank(spec.Pattern) {
		ranks = s.ranks()
	}
	return bench.Spec{
		Transport: s.Name,
		Pattern:   spec.Pattern,
		Ranks:     ranks,
		Sizes:     slices.Clone(spec.Sizes),
		Reps:      cmp.Or(spec.Reps, bench.DefaultReps),
		Iters:     spec.Iters,
		Warmup:    spec.Warmup,
		Window:    cmp.Or(spec.Window, bench.DefaultWindow),
		Validate:  spec.Validate,
	}, nil
}

// multiRank says whether the anchor runs p with Spec.Ranks ranks (bench's
// multi-rank patterns it has: mbw_mr, alltoall).
func multiRank(p bench.Pattern) bool { return p == bench.MultiBandwidth || p == bench.AllToAll }

// launcherCommand prepares the launcher with the stack's environment:
// allowed to run as root (Open MPI refuses otherwise; the variables mean
// nothing to other stacks), in a process group of its own, and killed with
// this process. On cancellation the whole group gets SIGTERM, so ranks that
// hang die even where the launcher would wait for them.
func launcherCommand(ctx context.Context, s Stack, launcher string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, launcher, args...)
	cmd.Env = os.Environ()
	if os.Geteuid() == 0 {
		cmd.Env = append(cmd.Env, "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	}
	cmd.Env = append(cmd.Env, s.Env...) // exec keeps the last value of a key
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return sys.KillGroup(cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// runLaunch runs launcher with args as launcherCommand prepares it, set up
// further by setup (output, environment), bounded by LaunchBound. A launch
// still going at the bound or at ctx's deadline is ErrHang. The command is
// returned for its arguments, also with an error.
func runLaunch(ctx context.Context, s Stack, launcher string, args []string, setup func(*exec.Cmd)) (*exec.Cmd, error) {
	ctx, cancel := context.WithTimeout(ctx, LaunchBound)
	defer cancel()
	cmd := launcherCommand(ctx, s, launcher, args...)
	setup(cmd)
	err := runGroup(cmd)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%w (%w): %w", ErrHang, ctx.Err(), err)
	}
	return cmd, err
}

// runGroup runs cmd from launcherCommand and then kills what is left of its
// process group (ranks a failed launcher left behind).
func runGroup(cmd *exec.Cmd) error {
	err := cmd.Run()
	if cmd.Process != nil {
		_ = sys.KillGroup(cmd.Process.Pid, syscall.SIGKILL) // ESRCH: nothing left
	}
	return err
}

var (
	openMPIVersion = regexp.MustCompile(`\((?:Open MPI|OpenRTE)\) (\S+)`) // OpenRTE: mpirun.openmpi
	mpichVersion   = regexp.MustCompile(`(?m)^MPICH Version:\s+(\S+)`)
	mpichDevice    = regexp.MustCompile(`(?m)^MPICH Device:\s+(\S+)`)
	hydraVersion   = regexp.MustCompile(`(?m)^\s*Version:\s+(\S+)`)
)

// libraryVersion says which MPI library the stack runs: {"openmpi":
// "4.1.4"} from mpirun --version; for MPICH {"mpich": "4.0.2",
// "mpich_device": "ch4:ucx"} from mpichversion, or Hydra's version from
// mpirun --version where mpichversion is missing; else {"mpi": the
// launcher's first line of --version}.
func libraryVersion(ctx context.Context, s Stack, launcher string) (map[string]string, error) {
	if s.family() == "mpich" {
		if mv, err := exec.LookPath("mpichversion"); err == nil {
			out, err := exec.CommandContext(ctx, mv).CombinedOutput()
			if m := mpichVersion.FindSubmatch(out); err == nil && m != nil {
				libs := map[string]string{"mpich": string(m[1])}
				if d := mpichDevice.FindSubmatch(out); d != nil {
					libs["mpich_device"] = string(d[1])
				}
				return libs, nil
			}
		}
	}
	var buf bytes.Buffer
	if _, err := runLaunch(ctx, s, launcher, []string{"--version"}, func(cmd *exec.Cmd) { cmd.Stdout, cmd.Stderr = &buf, &buf }); err != nil {
		return nil, fmt.Errorf("%s --version: %w%s", launcher, err, indentOutput(buf.Bytes()))
	}
	out := buf.Bytes()
	if m := openMPIVersion.FindSubmatch(out); m != nil {
		return map[string]string{"openmpi": string(m[1])}, nil
	}
	if m := hydraVersion.FindSubmatch(out); s.family() == "mpich" && m != nil {
		return map[string]string{"mpich": string(m[1])}, nil
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return map[string]string{"mpi": first}, nil
}

// tailLines is how much of a failed launcher's output an error carries.
const tailLines = 30

// tail returns the last tailLines lines of out.
func tail(out []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	return bytes.Join(lines[max(len(lines)-tailLines, 0):], []byte("\n"))
}

// indentOutput formats a tool's output to follow an error message on its
// own lines, or returns "" when there is none.
func indentOutput(out []byte) string {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return ""
	}
	return "\n\t" + strings.ReplaceAll(string(out), "\n", "\n\t")
}
