package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
	out := filepath.Join(dir, "out")
	stdout, stderr, code := run(t, "stacks", "--stack", "openmpi", "--profile", prof, "--reps", "2",
		"--latency-sizes", "8", "--bw-sizes", "4K,1M", "--settle", "0", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"latency (us, lower is better); reference: gotune sm", "bw (MB/s, higher is better)",
		"gotune auto", "openmpi defaults", "openmpi tuned", "n=2"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
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
	for _, r := range results {
		labels[r.Label]++
	}
	for _, l := range []string{"gotune sm", "gotune auto", "openmpi defaults", "openmpi tuned"} {
		if labels[l] != 2 { // latency and bw
			t.Errorf("%s: %d results stored, want 2 (%v)", l, labels[l], labels)
		}
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
