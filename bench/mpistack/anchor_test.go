package mpistack

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
)

// buildOrSkip compiles the anchor with Open MPI's wrapper, skipping the test
// when Open MPI is not installed.
func buildOrSkip(t *testing.T, ctx context.Context) string {
	t.Helper()
	_, err := exec.LookPath("mpirun")
	testutil.SkipUnless(t, "openmpi", err)
	return buildStackOrSkip(t, ctx, "openmpi", OpenMPIVader("cma"))
}

func TestRunOpenMPIVader(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	bin := buildOrSkip(t, ctx)
	sizes := []int{8, 64 << 10}
	for _, mech := range []string{"cma", "none"} {
		for _, pattern := range []bench.Pattern{bench.Latency, bench.Bandwidth} {
			s := OpenMPIVader(mech)
			t.Run(mech+"/"+string(pattern), func(t *testing.T) {
				spec := bench.Spec{Pattern: pattern, Sizes: sizes, Reps: 2, Iters: 50, Warmup: 5, Window: 16}
				res, err := Run(ctx, s, bin, spec)
				if err != nil {
					t.Fatal(err)
				}
				if res.Label != s.Name || res.Spec.Transport != s.Name || res.Spec.Window != 16 {
					t.Errorf("label %q, spec transport %q window %d; want %q, %q, 16",
						res.Label, res.Spec.Transport, res.Spec.Window, s.Name, s.Name)
				}
				if res.Provenance.Libraries["openmpi"] == "" || res.Provenance.Cores == 0 {
					t.Errorf("provenance lacks the Open MPI version or the machine: %+v", res.Provenance)
				}
				if len(res.Points) != len(sizes) {
					t.Fatalf("%d points for %d sizes", len(res.Points), len(sizes))
				}
				for i, p := range res.Points {
					if p.Size != sizes[i] || p.Unit != pattern.Unit() || p.Iters != 50 || p.Warmup != 5 {
						t.Errorf("point %d: size %d unit %s iters %d warmup %d", i, p.Size, p.Unit, p.Iters, p.Warmup)
					}
					if len(p.Samples) != spec.Reps {
						t.Errorf("size %d: %d samples for %d reps", p.Size, len(p.Samples), spec.Reps)
					}
					// (2 repetitions leave the confidence interval unbounded)
					for _, v := range append([]float64{p.Median, p.P50, p.P90, p.P99}, p.Samples...) {
						if !(v > 0) || math.IsInf(v, 0) {
							t.Errorf("size %d: value %v is not positive and finite: %+v", p.Size, v, p)
						}
					}
				}
			})
		}
	}
}

func TestRunReportsLauncherFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	bin := buildOrSkip(t, ctx)
	s := Stack{Name: "openmpi self only", Args: []string{"--mca", "pml", "ob1", "--mca", "btl", "self"}}
	_, err := Run(ctx, s, bin, bench.Spec{Pattern: bench.Latency, Sizes: []int{8}, Reps: 1, Iters: 10, Warmup: 1})
	if err == nil {
		t.Fatal("ranks that cannot reach each other ran the benchmark")
	}
	if !strings.Contains(err.Error(), "run anchor through openmpi self only") || !strings.Contains(err.Error(), "exit status") {
		t.Errorf("error lacks context: %v", err)
	}
	if strings.Count(err.Error(), "\n") < 2 {
		t.Errorf("error carries no launcher output: %v", err)
	}
}

func TestMissingToolsAreNotSupported(t *testing.T) {
	s := Stack{Name: "nowhere", MPICC: "no-such-mpicc-gotune", MPIRun: "no-such-mpirun-gotune"}
	_, err := Build(t.Context(), s, t.TempDir())
	if !errors.Is(err, sys.ErrNotSupported) || !strings.Contains(err.Error(), "no-such-mpicc-gotune not found in PATH") {
		t.Errorf("Build without a compiler: %v, want ErrNotSupported naming it", err)
	}
	_, err = Run(t.Context(), s, "anchor", bench.Spec{Pattern: bench.Latency, Sizes: []int{8}})
	if !errors.Is(err, sys.ErrNotSupported) || !strings.Contains(err.Error(), "no-such-mpirun-gotune not found in PATH") {
		t.Errorf("Run without a launcher: %v, want ErrNotSupported naming it", err)
	}
}

func TestBuildReportsCompilerOutput(t *testing.T) {
	cc := filepath.Join(t.TempDir(), "failing-mpicc")
	script := "#!/bin/sh\necho 'anchor.c:1:1: error: no MPI here' >&2\nexit 1\n"
	if err := os.WriteFile(cc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Build(t.Context(), Stack{Name: "broken", MPICC: cc}, t.TempDir())
	if err == nil || errors.Is(err, sys.ErrNotSupported) ||
		!strings.Contains(err.Error(), "build anchor with broken") || !strings.Contains(err.Error(), "error: no MPI here") {
		t.Fatalf("got %v, want a build failure carrying the compiler's output", err)
	}
}

func TestRunRejectsBadSpecs(t *testing.T) {
	tests := []struct {
		name string
		spec bench.Spec
		want string
	}{
		{"pattern", bench.Spec{Pattern: "gather", Sizes: []int{8}}, "unknown pattern"},
		{"collective", bench.Spec{Pattern: "allreduce", Sizes: []int{8}}, "the anchor has no such pattern"},
		{"no sizes", bench.Spec{Pattern: bench.Latency}, "no message sizes"},
		{"negative size", bench.Spec{Pattern: bench.Latency, Sizes: []int{-1}}, "negative message size"},
		{"negative iters", bench.Spec{Pattern: bench.Latency, Sizes: []int{8}, Iters: -1}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(t.Context(), OpenMPIVader("cma"), "anchor", tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// A launch still running at LaunchBound is a hang: Open MPI's head-to-head
// with a fast box of one byte never ends, and Run says so in time.
func TestRunBoundsALaunch(t *testing.T) {
	bin := buildOrSkip(t, t.Context())
	old := LaunchBound
	LaunchBound = 3 * time.Second
	t.Cleanup(func() { LaunchBound = old })
	s := OpenMPI("openmpi fbox 1")
	s.Env = paramFile(t, "btl_vader_fbox_size = 1")
	_, err := Run(t.Context(), s, bin, bench.Spec{Pattern: HeadToHead, Sizes: []int{8}, Reps: 1, Iters: 10, Window: 16})
	if !errors.Is(err, ErrHang) {
		t.Fatalf("%v, want ErrHang", err)
	}
}
