package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
	"github.com/gotune/gotune/bench/output"
	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/profile"
)

// gotune stacks measures gotune sm and Open MPI with its defaults and
// with a profile's tuned values, and prints one comparison with a column
// per configuration; --out keeps every run as JSON lines.
func TestStacks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real MPI ranks")
	}
	_, err := exec.LookPath("mpirun.openmpi")
	testutil.SkipUnless(t, "openmpi", err)
	dir := t.TempDir()
	prof := writeProfile(t, dir, "profile.yaml", func(p *profile.Profile) {
		p.Stacks = map[string]profile.Stack{"openmpi": {Version: "4.1.4",
			Params:   map[string]string{"btl_vader_eager_limit": "8192"},
			Evidence: map[string]string{"btl_vader_eager_limit": "test"}}}
	})
	// OSU's rows run a stand-in that adds Open MPI's eager limit, read
	// through MPI_T, to its figures: the tuned row shows the file arrived.
	osu := filepath.Join(dir, "osu")
	if err := os.Mkdir(osu, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"osu_latency", "osu_bw"} {
		if out, err := exec.Command("mpicc.openmpi", "-o", filepath.Join(osu, name), "../../bench/mpistack/testdata/fakeosu.c").CombinedOutput(); err != nil {
			t.Fatalf("mpicc.openmpi: %v\n%s", err, out)
		}
	}
	t.Setenv("FAKEOSU_CVAR", "btl_vader_eager_limit")
	out := filepath.Join(dir, "out")
	stdout, stderr, code := run(t, "stacks", "--stack", "openmpi", "--profile", prof, "--reps", "2", "--transports", "cma",
		"--latency-sizes", "8", "--bw-sizes", "4K,1M", "--settle", "0", "--out", out, "--osu", osu)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"latency (us, lower is better); reference: gotune sm", "bw (MB/s, higher is better)",
		"gotune auto", "openmpi defaults", "openmpi tuned", "n=2"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if cma, auto := strings.Index(stdout, "gotune cma"), strings.Index(stdout, "gotune auto"); cma < 0 || cma > auto {
		t.Errorf("gotune cma (--transports) is not a column of its own before gotune auto:\n%s", stdout)
	}
	jsonl, _ := filepath.Glob(filepath.Join(out, "stacks-*.jsonl"))
	if len(jsonl) != 1 {
		t.Fatalf("--out wrote %v", jsonl)
	}
	f, err := os.Open(jsonl[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	results, err := output.ReadJSON(jsonl[0], bufio.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]int{}
	osuBW := map[string][]float64{}
	for _, r := range results {
		labels[r.Label]++
		if strings.HasPrefix(r.Label, "osu ") && r.Spec.Pattern == bench.Bandwidth {
			for _, p := range r.Points {
				osuBW[r.Label] = append(osuBW[r.Label], p.Samples...)
			}
		}
	}
	for _, l := range []string{"gotune sm", "gotune cma", "gotune auto", "openmpi defaults", "openmpi tuned", "osu openmpi", "osu openmpi tuned"} {
		if labels[l] != 2 { // latency and bw
			t.Errorf("%s: %d results stored, want 2 (%v)", l, labels[l], labels)
		}
	}
	def, tuned := osuBW["osu openmpi"], osuBW["osu openmpi tuned"]
	if len(def) == 0 || len(def) != len(tuned) {
		t.Fatalf("osu bw samples: defaults %v, tuned %v", def, tuned)
	}
	for i := range def {
		if tuned[i]-def[i] != 8192-4096 { // the stand-in adds the eager limit: the file's against Open MPI's default
			t.Errorf("osu bw sample %d: tuned %v, defaults %v: the eager limit OSU ran with was not the profile's", i, tuned[i], def[i])
		}
	}
}

// --transports names gotune transports measured beside sm: an unknown
// one, sm or auto (measured anyway), or one with --gpu is refused at once.
func TestStacksTransportsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--transports", "carrier-pigeon"}, `--transports "carrier-pigeon"`},
		{[]string{"--transports", "cma,sm"}, `--transports "sm": gotune sm is always measured`},
		{[]string{"--transports", "auto"}, `--transports "auto"`},
		{[]string{"--gpu", "--transports", "cma"}, "--transports do not apply"},
	} {
		if _, stderr, code := run(t, append([]string{"stacks", "--reps", "1"}, tc.args...)...); code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q: want %q", tc.args, code, stderr, tc.want)
		}
	}
}

// --reference names the column the others are compared with: it moves to
// the front (the comparison's reference); a label not measured is refused
// before anything runs, naming the columns there are.
func TestStacksReference(t *testing.T) {
	old := newStackContenders
	t.Cleanup(func() { newStackContenders = old })
	measured := 0
	newStackContenders = func(_ context.Context, _ string, _ []string, _ *profile.Profile, _ int, _ io.Writer) ([]mpistack.Contender, error) {
		mk := func(label string, mbps float64) mpistack.Contender {
			return mpistack.Contender{Label: label, Run: func(_ context.Context, s bench.Spec) (bench.Result, error) {
				measured++
				var pts []bench.Point
				for _, size := range s.Sizes {
					pts = append(pts, bench.Summarize(size, s.Pattern.Unit(), []float64{mbps}, nil))
				}
				return bench.Result{Label: label, Spec: s, Points: pts}, nil
			}}
		}
		return []mpistack.Contender{mk("gotune sm", 100), mk("gotune auto", 200), mk("fake mpi", 150)}, nil
	}
	args := []string{"stacks", "--reps", "1", "--latency-sizes", "8", "--bw-sizes", "4K", "--settle", "0", "-q"}
	stdout, stderr, code := run(t, append(args, "--reference", "gotune auto")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "reference: gotune auto") || !strings.Contains(stdout, "fake mpi 0.750") {
		t.Errorf("the comparison does not take gotune auto as its reference:\n%s", stdout)
	}
	measured = 0
	_, stderr, code = run(t, append(args, "--reference", "gotune cma")...)
	if code == 0 || !strings.Contains(stderr, `--reference "gotune cma": not measured in this run; the columns are "gotune sm", "gotune auto", "fake mpi"`) || measured != 0 {
		t.Errorf("an unmeasured reference: exit %d, %d runs, stderr %q", code, measured, stderr)
	}
}

// --osu names an OSU install: one gotune cannot read stops the command
// before anything runs, naming the directory.
func TestStacksOSUDirectory(t *testing.T) {
	empty := t.TempDir()
	_, stderr, code := run(t, "stacks", "--osu", empty, "--stack", "openmpi", "--reps", "1")
	if code == 0 || !strings.Contains(stderr, "--osu: osu "+empty+": none of osu_alltoall") {
		t.Errorf("exit %d, stderr %q: want a failure naming %s", code, stderr, empty)
	}
}

// stacks --gpu: the GPU contenders with gotune cudaipc as the reference;
// the flags of the host run are refused; without two GPUs it says so.
func TestStacksGPU(t *testing.T) {
	for _, args := range [][]string{{"--gpu", "--stack", "openmpi"}, {"--gpu", "--ranks", "4"}, {"--gpu", "--osu", "/opt/osu"}} {
		if _, stderr, code := run(t, append([]string{"stacks"}, args...)...); code == 0 || !strings.Contains(stderr, "--gpu measures one pair of GPUs") {
			t.Errorf("stacks %v: exit %d, %s; want the flags refused", args, code, stderr)
		}
	}
	if n, err := gpuCount(); err == nil && n < 2 {
		_, stderr, code := run(t, "stacks", "--gpu", "--reps", "1", "-q")
		if code == 0 || !strings.Contains(stderr, "measures a pair of GPUs") {
			t.Errorf("stacks --gpu with %d GPU(s): exit %d, %s; want it not supported", n, code, stderr)
		}
	}

	old := newGPUContenders
	t.Cleanup(func() { newGPUContenders = old })
	newGPUContenders = func(_ context.Context, _ string, _ *profile.Profile, script string, _ io.Writer) ([]mpistack.Contender, error) {
		if script != "b.py" {
			t.Errorf("--torch-script reached the contenders as %q", script)
		}
		mk := func(label string, scale float64) mpistack.Contender {
			return mpistack.Contender{Label: label, Run: func(_ context.Context, s bench.Spec) (bench.Result, error) {
				var pts []bench.Point
				for _, size := range s.Sizes {
					pts = append(pts, bench.Summarize(size, s.Pattern.Unit(), []float64{scale * float64(size)}, nil))
				}
				return bench.Result{Label: label, Spec: s, Points: pts}, nil
			}}
		}
		return []mpistack.Contender{mk("gotune cudaipc", 1), mk("nccl defaults", 2), mk("torch", 0.5)}, nil
	}
	stdout, stderr, code := run(t, "stacks", "--gpu", "--torch-script", "b.py", "--reps", "2", "--latency-sizes", "8", "--bw-sizes", "1M", "--settle", "0", "-q")
	if code != 0 {
		t.Fatalf("stacks --gpu: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"reference gotune cudaipc", "nccl defaults", "torch"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stacks --gpu: no %q in\n%s", want, stdout)
		}
	}
}
