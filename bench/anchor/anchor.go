package anchor

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
	"github.com/gotune/gotune/internal/sys"
)

//go:embed csrc/anchor.c
var source []byte

// ranks is how many processes the anchor runs.
const ranks = 2

// Stack is an MPI stack configuration to measure through.
type Stack struct {
	Name   string   // label, e.g. "openmpi vader cma"
	MPICC  string   // compiler wrapper, default "mpicc"
	MPIRun string   // launcher, default "mpirun"
	Args   []string // extra launcher args, e.g. MCA settings
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

func (s Stack) mpicc() string  { return cmp.Or(s.MPICC, "mpicc") }
func (s Stack) mpirun() string { return cmp.Or(s.MPIRun, "mpirun") }

// Build compiles anchor.c with the stack's mpicc into dir and returns the
// binary path. A missing compiler wrapper matches sys.ErrNotSupported.
func Build(ctx context.Context, s Stack, dir string) (string, error) {
	cc, err := exec.LookPath(s.mpicc())
	if err != nil {
		return "", fmt.Errorf("build anchor with %s: %w", s.Name,
			sys.NotSupported("openmpi", s.mpicc()+" not found in PATH", err))
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

// Run measures spec through the stack with a binary from Build and returns a
// result labelled with the stack's name, one point per size summarized by
// bench.Summarize, and the MPI library's version in the provenance.
//
// Of spec it uses Pattern, Sizes, Reps (0: bench.DefaultReps), Iters and
// Warmup (0: OSU's counts for each size) and Window (0: bench.DefaultWindow);
// the result's Spec records those, with Transport set to the stack's name.
// Transport options, CPUs and segment backends belong to gotune's transports:
// placement is the launcher's (see OpenMPIVader). Payload validation is not
// supported.
func Run(ctx context.Context, s Stack, binary string, spec bench.Spec) (bench.Result, error) {
	spec, err := resolve(s, spec)
	if err != nil {
		return bench.Result{}, fmt.Errorf("run anchor through %s: %w", s.Name, err)
	}
	launcher, err := exec.LookPath(s.mpirun())
	if err != nil {
		return bench.Result{}, fmt.Errorf("run anchor through %s: %w", s.Name,
			sys.NotSupported("openmpi", s.mpirun()+" not found in PATH", err))
	}
	prov := hostinfo.Collect("/")
	name, version, err := libraryVersion(ctx, launcher)
	if err != nil {
		return bench.Result{}, fmt.Errorf("run anchor through %s: %w", s.Name, err)
	}
	prov.Libraries = map[string]string{name: version}

	sizes := make([]string, len(spec.Sizes))
	for i, n := range spec.Sizes {
		sizes[i] = strconv.Itoa(n)
	}
	args := append([]string{"-np", strconv.Itoa(ranks)}, s.Args...)
	args = append(args, binary, string(spec.Pattern), strings.Join(sizes, ","),
		strconv.Itoa(spec.Reps), strconv.Itoa(spec.Iters), strconv.Itoa(spec.Warmup), strconv.Itoa(spec.Window))
	var stdout, stderr bytes.Buffer
	cmd := launcherCommand(ctx, launcher, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return bench.Result{}, fmt.Errorf("run anchor through %s: %w", s.Name, ctx.Err())
		}
		out := stderr.Bytes()
		if len(bytes.TrimSpace(out)) == 0 {
			out = stdout.Bytes()
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
		res.Points = append(res.Points, p)
	}
	return res, nil
}

// resolve checks spec and fills in its defaults; what the anchor does not use
// is dropped so the recorded spec says what ran.
func resolve(s Stack, spec bench.Spec) (bench.Spec, error) {
	if _, err := bench.ParsePattern(string(spec.Pattern)); err != nil {
		return spec, err
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
	if spec.Validate {
		return spec, errors.New("the anchor does not validate payloads")
	}
	return bench.Spec{
		Transport: s.Name,
		Pattern:   spec.Pattern,
		Sizes:     slices.Clone(spec.Sizes),
		Reps:      cmp.Or(spec.Reps, bench.DefaultReps),
		Iters:     spec.Iters,
		Warmup:    spec.Warmup,
		Window:    cmp.Or(spec.Window, bench.DefaultWindow),
	}, nil
}

// launcherCommand prepares the launcher: allowed to run as root (Open MPI
// refuses otherwise; the variables mean nothing to other stacks), and asked
// to stop with SIGTERM on cancellation so it can take its ranks down.
func launcherCommand(ctx context.Context, launcher string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, launcher, args...)
	if os.Geteuid() == 0 {
		cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

var openMPIVersion = regexp.MustCompile(`\(Open MPI\) (\S+)`)

// libraryVersion asks the launcher which MPI it belongs to: ("openmpi",
// "4.1.4") for Open MPI, else ("mpi", its first line of --version).
func libraryVersion(ctx context.Context, launcher string) (name, version string, err error) {
	out, err := launcherCommand(ctx, launcher, "--version").CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("%s --version: %w%s", launcher, err, indentOutput(out))
	}
	if m := openMPIVersion.FindSubmatch(out); m != nil {
		return "openmpi", string(m[1]), nil
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return "mpi", first, nil
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
