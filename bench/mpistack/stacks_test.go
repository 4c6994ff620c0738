package mpistack

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
)

// stacks are the MPI stacks the tests run through, each with the
// GOTUNE_REQUIRE capability that makes its absence a failure.
var stacks = []struct {
	capability string
	stack      Stack
}{
	{"openmpi", OpenMPI("openmpi")},
	{"mpich", MPICH("mpich")},
}

// buildStackOrSkip compiles the anchor with s's wrapper, skipping the test
// when the stack is not installed.
func buildStackOrSkip(t *testing.T, ctx context.Context, capability string, s Stack) string {
	t.Helper()
	bin, err := Build(ctx, s, t.TempDir())
	if errors.Is(err, sys.ErrNotSupported) {
		testutil.SkipUnless(t, capability, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// paramFile writes an Open MPI param file and returns the Env that loads it
// as a file, as a tuned openmpi-mca-params.conf would be.
func paramFile(t *testing.T, lines ...string) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "openmpi-mca-params.conf")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"OMPI_MCA_mca_base_param_files=" + path}
}

// eachStack runs f as a subtest per installed stack (built, within
// timeout), skipping the stacks that are missing.
func eachStack(t *testing.T, timeout time.Duration, f func(t *testing.T, ctx context.Context, capability string, s Stack, bin string)) {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	for _, st := range stacks {
		t.Run(st.capability, func(t *testing.T) {
			f(t, ctx, st.capability, st.stack, buildStackOrSkip(t, ctx, st.capability, st.stack))
		})
	}
}

func TestRunStacks(t *testing.T) {
	sizes := []int{8, 64 << 10}
	eachStack(t, 2*time.Minute, func(t *testing.T, ctx context.Context, capability string, s Stack, bin string) {
		for _, tt := range []struct {
			pattern  bench.Pattern
			validate bool
		}{
			{bench.Latency, false},
			{bench.Bandwidth, false},
			{bench.Latency, true},
			{bench.BiBandwidth, true},
			{HeadToHead, true},
			{bench.AllocChurn, false},
			{bench.AllocChurn, true},
		} {
			name := string(tt.pattern)
			if tt.validate {
				name += "/validated"
			}
			t.Run(name, func(t *testing.T) {
				spec := bench.Spec{Pattern: tt.pattern, Sizes: sizes, Reps: 2, Iters: 20, Warmup: 2, Window: 8, Validate: tt.validate}
				res, err := Run(ctx, s, bin, spec)
				if err != nil {
					t.Fatal(err)
				}
				if v := res.Provenance.Libraries[capability]; v == "" {
					t.Errorf("provenance lacks the %s version: %v", capability, res.Provenance.Libraries)
				}
				if len(res.Points) != len(sizes) {
					t.Fatalf("%d points for %d sizes", len(res.Points), len(sizes))
				}
				for i, p := range res.Points {
					if p.Size != sizes[i] || p.Unit != tt.pattern.Unit() || p.Iters != 20 || len(p.Samples) != 2 ||
						p.Validated != tt.validate || !(p.Median > 0) {
						t.Errorf("point %d: %+v", i, p)
					}
				}
			})
		}
	})
}

func TestRunFloodRanks(t *testing.T) {
	eachStack(t, time.Minute, func(t *testing.T, ctx context.Context, _ string, s Stack, bin string) {
		s.Ranks = 3
		res, err := Run(ctx, s, bin, bench.Spec{Pattern: Flood, Sizes: []int{8, 4096}, Reps: 1, Iters: 5, Warmup: 1, Window: 4, Validate: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Points) != 2 || !res.Points[1].Validated || !(res.Points[1].Median > 0) {
			t.Errorf("points %+v", res.Points)
		}
	})
}

// The multi-rank patterns run as many ranks as the spec says, validated,
// and a flipped byte in a rank's received message is caught.
func TestRunMultiRankPatterns(t *testing.T) {
	eachStack(t, 2*time.Minute, func(t *testing.T, ctx context.Context, _ string, s Stack, bin string) {
		for _, p := range []bench.Pattern{bench.MultiBandwidth, bench.AllToAll} {
			spec := bench.Spec{Pattern: p, Ranks: 4, Sizes: []int{8, 4096}, Reps: 1, Iters: 5, Warmup: 1, Window: 4, Validate: true}
			res, err := Run(ctx, s, bin, spec)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if res.Spec.Ranks != 4 || len(res.Points) != 2 || !res.Points[1].Validated || !(res.Points[1].Median > 0) || res.Points[1].Unit != p.Unit() {
				t.Errorf("%s: spec %+v points %+v", p, res.Spec, res.Points)
			}
			s := s
			s.Env = []string{"GOTUNE_ANCHOR_CORRUPT=3"}
			if _, err := Run(ctx, s, bin, spec); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "payload mismatch: "+string(p)) {
				t.Errorf("%s with rank 3's message corrupted: got %v, want ErrCorrupt", p, err)
			}
		}
	})
}

// The anchor's multi-rank patterns refuse rank counts they cannot pair,
// and bench's patterns it does not have, before any launcher starts.
func TestResolveMultiRank(t *testing.T) {
	for _, tc := range []struct {
		spec bench.Spec
		want string
	}{
		{bench.Spec{Pattern: bench.MultiBandwidth, Ranks: 3, Sizes: []int{8}}, "even number"},
		{bench.Spec{Pattern: bench.MultiLatency, Ranks: 4, Sizes: []int{8}}, "no such pattern"},
		{bench.Spec{Pattern: bench.Incast, Ranks: 4, Sizes: []int{8}}, "no such pattern"},
	} {
		s := Stack{Name: "x"}
		s.Ranks = tc.spec.Ranks
		if _, err := resolve(s, tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with %d ranks: %v, want an error saying %q", tc.spec.Pattern, tc.spec.Ranks, err, tc.want)
		}
	}
	spec, err := resolve(Stack{Name: "x", Ranks: 6}, bench.Spec{Pattern: bench.AllToAll, Ranks: 6, Sizes: []int{8}})
	if err != nil || spec.Ranks != 6 {
		t.Errorf("alltoall with 6 ranks: %+v, %v", spec, err)
	}
}

// TestRunCatchesCorruption plants a flipped byte in rank 1's first received
// message (anchor.c's test hook) under real ranks.
func TestRunCatchesCorruption(t *testing.T) {
	eachStack(t, time.Minute, func(t *testing.T, ctx context.Context, _ string, s Stack, bin string) {
		s.Env = []string{"GOTUNE_ANCHOR_CORRUPT=1"}
		// alloc checks its freshly allocated buffers as bw its fixed ones
		for _, p := range []bench.Pattern{bench.Bandwidth, bench.AllocChurn} {
			_, err := Run(ctx, s, bin, bench.Spec{Pattern: p, Sizes: []int{4096}, Reps: 1, Iters: 3, Warmup: 1, Window: 4, Validate: true})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "payload mismatch: "+string(p)+" size 4096 iteration 0 window slot 0 from rank 0: byte 2048") {
				t.Fatalf("%s: got %v, want ErrCorrupt naming byte 2048 of the first message", p, err)
			}
		}
	})
}

// TestCheck runs the hazards through real stacks: default settings pass,
// and deliberately bad tuned files fail with the right kind of error.
//
// btl_vader_fbox_size = 1 in a param file hangs Open MPI 4.1.4's h2h at 8
// bytes every time (ping-pong passes: only head-to-head traffic starves);
// btl_vader_eager_limit = 1 fails in MPI_Init; UCX_TLS=nosuchtl fails
// MPICH (ch4:ucx) in MPI_Init.
func TestCheck(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	sizes := []int{8, 16 << 10, 1 << 20}
	tests := []struct {
		name       string
		capability string
		stack      Stack
		env        func(t *testing.T) []string
		want       error // nil: passes
		text       string
	}{
		{"openmpi defaults", "openmpi", OpenMPI("openmpi"), nil, nil, ""},
		{"mpich defaults", "mpich", MPICH("mpich"), nil, nil, ""},
		{"openmpi fbox of 1 byte hangs", "openmpi", OpenMPI("openmpi"),
			func(t *testing.T) []string { return paramFile(t, "btl_vader_fbox_size = 1") }, ErrHang, "h2h"},
		{"openmpi eager limit of 1 byte crashes", "openmpi", OpenMPI("openmpi"),
			func(t *testing.T) []string { return paramFile(t, "btl_vader_eager_limit = 1") }, ErrCrash, "exit status"},
		{"mpich without a UCX transport crashes", "mpich", MPICH("mpich"),
			func(*testing.T) []string { return []string{"UCX_TLS=nosuchtl"} }, ErrCrash, "MPI_Init"},
		{"openmpi corrupted", "openmpi", OpenMPI("openmpi"),
			func(*testing.T) []string { return []string{"GOTUNE_ANCHOR_CORRUPT=0"} }, ErrCorrupt, "h2h size 8 iteration 0"},
		{"mpich corrupted", "mpich", MPICH("mpich"),
			func(*testing.T) []string { return []string{"GOTUNE_ANCHOR_CORRUPT=1"} }, ErrCorrupt, "payload mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := buildStackOrSkip(t, ctx, tt.capability, tt.stack)
			s := tt.stack
			if tt.env != nil {
				s.Env = tt.env(t)
			}
			// A run that must pass gets ample time (a 3-rank MPICH flood on 2
			// busy cores takes seconds); one that must hang is cut at 5 s,
			// which only a hang reaches.
			timeout := time.Minute
			if tt.want == ErrHang {
				timeout = 5 * time.Second
			}
			start := time.Now()
			err := Check(ctx, s, bin, sizes, CheckOptions{Window: 16, Iters: 10, Timeout: timeout})
			t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, other := range []error{ErrHang, ErrCorrupt, ErrCrash} {
				if errors.Is(err, other) != (other == tt.want) {
					t.Fatalf("got %v; want only %v", err, tt.want)
				}
			}
			if !strings.Contains(err.Error(), "check "+s.Name) || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %q lacks the stack's name or %q", err, tt.text)
			}
			// Hydra returns from an abort while its ranks (sessions of
			// their own) are still being killed: give them a moment.
			left := processesOf(t, bin)
			for deadline := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = processesOf(t, bin) {
				time.Sleep(20 * time.Millisecond)
			}
			if len(left) > 0 {
				t.Errorf("ranks left running 5s after Check returned: %v", left)
			}
		})
	}
}

// processesOf lists the live processes (not zombies) running binary.
func processesOf(t *testing.T, binary string) []string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !strings.HasPrefix(string(cmdline), binary+"\x00") {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		if _, rest, ok := strings.Cut(string(stat), ") "); ok && !strings.HasPrefix(rest, "Z") {
			live = append(live, filepath.Base(d))
		}
	}
	return live
}

func TestCheckRejectsBadRequests(t *testing.T) {
	tests := []struct {
		name  string
		sizes []int
		want  string
	}{
		{"no sizes", nil, "no message sizes"},
		{"negative size", []int{-1}, "negative message size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(t.Context(), OpenMPI("openmpi"), "anchor", tt.sizes, CheckOptions{})
			if err == nil || errors.Is(err, ErrCrash) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want a plain error containing %q", err, tt.want)
			}
		})
	}
}

func TestMissingStackNamesIt(t *testing.T) {
	s := MPICH("mpich")
	s.MPICC, s.MPIRun = "no-such-mpicc-gotune", "no-such-mpirun-gotune"
	_, err := Build(t.Context(), s, t.TempDir())
	var ns *sys.NotSupportedError
	if !errors.As(err, &ns) || ns.What != "mpich" || !strings.Contains(err.Error(), "no-such-mpicc-gotune not found") {
		t.Errorf("Build: %v, want ErrNotSupported for mpich naming the wrapper", err)
	}
	err = Check(t.Context(), s, "anchor", []int{8}, CheckOptions{})
	if !errors.As(err, &ns) || ns.What != "mpich" || errors.Is(err, ErrCrash) {
		t.Errorf("Check: %v, want ErrNotSupported for mpich, no verdict", err)
	}
}

// A job whose rank reported a bad payload but whose abort does not end it
// (a launcher that stays, as MPICH's was seen to under load) ends
// abortGrace later as a corruption, not at the launch's deadline as a hang.
func TestStalledAbortIsACorruption(t *testing.T) {
	launcher := filepath.Join(t.TempDir(), "mpirun-stalls")
	script := `#!/bin/sh
[ "$1" = --version ] && { echo "stalling launcher 1.0"; exit 0; }
echo "anchor rank 1: payload mismatch: bw size 4096 iteration 0 window slot 0 from rank 0: byte 2048 is 0x11, want 0xee" >> "$GOTUNE_ANCHOR_REPORT"
exec sleep 600
`
	if err := os.WriteFile(launcher, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := Stack{Name: "stalling", MPIRun: launcher}
	_, err := Run(ctx, s, "anchor", bench.Spec{Pattern: bench.Bandwidth, Sizes: []int{4096}, Reps: 1, Iters: 3, Warmup: 1, Window: 4, Validate: true})
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, errAbortStalled) || errors.Is(err, ErrHang) {
		t.Fatalf("got %v, want ErrCorrupt after a stalled abort", err)
	}
}

// The launch that asks which pml Open MPI selects is bounded like every
// other: a launcher that never ends is a hang at LaunchBound (a killed
// rank left mpirun waiting in a fault campaign run).
func TestSelectedPMLIsBounded(t *testing.T) {
	launcher := filepath.Join(t.TempDir(), "mpirun-hangs")
	if err := os.WriteFile(launcher, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := LaunchBound
	LaunchBound = time.Second
	t.Cleanup(func() { LaunchBound = old })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := SelectedPML(ctx, Stack{Name: "hanging", Family: "openmpi", MPIRun: launcher}, "anchor")
	if !errors.Is(err, ErrHang) || ctx.Err() != nil {
		t.Fatalf("got %v (test context: %v), want ErrHang at the bound", err, ctx.Err())
	}
}
