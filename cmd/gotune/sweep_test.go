package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/tuner/store"
	"github.com/gotune/gotune/tuner/sweep"
)

const tinyPlanYAML = `budget: 3m
rounds: 2
max_rounds: 3
reps: 2
rep_bytes: 4M
window: 8
segment: posix
eager: [1K, 4K]
eager_sizes: 512,2K
fragments: [64Kx4, 64Kx16]
fragment_sizes: 64K,1M
depths: [8, 64]
depth_sizes: "8"
transport_sizes: 8K:1M
alloc_purges: [immediate]
alloc_thp: [false]
alloc_caches: [8M]
alloc_sizes: 64K
probes: [H5]
verify_sizes: 1K,1M
verify_rounds: 1
`

// startCLI runs the gotune CLI as a child process (this test binary).
func startCLI(t *testing.T, args ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), cliEnv+"="+strings.Join(args, "\x1f"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(stderr)
}

// A sweep killed with SIGKILL in the middle resumes: every trial it had
// finished is kept and not measured again, the profile comes out, and no
// shared segment is left behind.
func TestSweepKilledThenResumed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real rank processes")
	}
	dir := t.TempDir()
	plan := filepath.Join(dir, "tiny.yaml")
	if err := os.WriteFile(plan, []byte(tinyPlanYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results")
	cmd, lines := startCLI(t, "sweep", "--plan", plan, "--out", out)
	trials := 0
	for lines.Scan() { // progress: one line per finished trial
		if strings.Contains(lines.Text(), " round ") {
			if trials++; trials == 5 {
				break
			}
		}
	}
	if trials < 5 {
		cmd.Wait()
		t.Fatalf("the sweep ended after %d trials", trials)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	runs, _ := filepath.Glob(filepath.Join(out, "*", "*"))
	var runDir string
	for _, r := range runs {
		if st, err := os.Stat(r); err == nil && st.IsDir() {
			runDir = r
		}
	}
	if runDir == "" {
		t.Fatalf("no run directory in %v", runs)
	}
	keys := func() map[string]bool {
		recs, err := store.Read(filepath.Join(runDir, sweep.MeasurementsFile))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, r := range recs {
			if m[r.Key] {
				t.Fatalf("record %s stored twice", r.Key)
			}
			m[r.Key] = true
		}
		return m
	}
	before := keys()
	if len(before) < 5 {
		t.Fatalf("%d records survived the kill, want at least the 5 reported", len(before))
	}

	stdout, stderr, code := run(t, "sweep", "--resume", runDir)
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "reused") {
		t.Fatalf("summary:\n%s", stdout)
	}
	after := keys()
	for k := range before {
		if !after[k] {
			t.Fatalf("record %s lost on resume", k)
		}
	}
	if _, err := profile.Load(filepath.Join(runDir, sweep.ProfileFile)); err != nil {
		t.Fatal(err)
	}
	// Segments of a launcher that is gone (the killed sweep's); tests of
	// other packages running beside this one hold live ones.
	if left := launch.StaleSegments(); len(left) > 0 {
		t.Fatalf("left in /dev/shm: %v", left)
	}
	if _, _, code := run(t, "sweep", "--resume", runDir, "--plan", "full"); code == 0 {
		t.Fatal("--resume with --plan accepted")
	}
	if _, stderr, code := run(t, "tune", runDir); code != 0 {
		t.Fatalf("tune: exit %d: %s", code, stderr)
	}
}
