package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/testutil"
)

// smallPlanYAML is a sweep with one candidate a stage but both host
// transports weighed, a probe and a verification: every path of a sweep,
// in seconds.
const smallPlanYAML = `budget: 1m
rounds: 2
max_rounds: 2
reps: 2
rep_bytes: 1M
window: 8
eager: [4K]
eager_sizes: 2K
fragments: [64Kx4]
fragment_sizes: 64K
depths: [16]
depth_sizes: "8"
transports: [sm, cma]
transport_sizes: 64K,1M
ladder_step: 1
bisect: false
confirm_sizes: ""
alloc_purges: [immediate]
alloc_thp: [false]
alloc_caches: [8M]
alloc_sizes: 64K
probes: [H5]
verify_sizes: 1K,1M
verify_rounds: 1
`

// asUnprivileged runs the CLI (this test binary) with args as a user
// without privileges: nobody when the test runs as root, else the test's
// own user. It returns the CLI's output and error.
func asUnprivileged(t *testing.T, exe, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(exe)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, cliEnv+"="+strings.Join(args, "\x1f"))
	if os.Geteuid() == 0 {
		testutil.AsNobody(cmd)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// The main paths run without privileges: every host transport's validated
// bandwidth (cma needs no CAP_SYS_PTRACE between a job's own ranks), and a
// sweep that emits a profile, which auto then runs by.
func TestRunsWithoutPrivileges(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real rank processes")
	}
	exe, remove, err := testutil.SharedExecutable()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	dir := filepath.Dir(exe) // the unprivileged user writes its plan's results here
	if err := os.WriteFile(filepath.Join(dir, "small.yaml"), []byte(smallPlanYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []string{"sm", "cma", "tcp"} {
		out, err := asUnprivileged(t, exe, dir, "bench", "-t", tr, "-p", "bw", "-s", "8,64K,1M", "--reps", "2", "--iters", "10", "--warmup", "1", "--window", "4", "--settle", "0", "--validate", "-q")
		if err != nil || !strings.Contains(out, "1M") {
			t.Errorf("bench -t %s without privileges: %v\n%s", tr, err, out)
		}
	}
	out, err := asUnprivileged(t, exe, dir, "sweep", "--plan", "small.yaml", "--out", "results", "-q", "--no-report")
	if err != nil {
		t.Fatalf("sweep without privileges: %v\n%s", err, out)
	}
	profiles, _ := filepath.Glob(filepath.Join(dir, "results", "*", "*", "profile.yaml"))
	if len(profiles) != 1 {
		t.Fatalf("the sweep left %d profiles:\n%s", len(profiles), out)
	}
	if st, err := os.Stat(profiles[0]); err == nil && os.Geteuid() == 0 && st.Sys().(*syscall.Stat_t).Uid != testutil.Nobody {
		t.Fatalf("the profile is owned by uid %d: the sweep did not run as nobody", st.Sys().(*syscall.Stat_t).Uid)
	}
	out, err = asUnprivileged(t, exe, dir, "bench", "-t", "auto", "--profile", profiles[0], "-p", "bw", "-s", "8,1M", "--reps", "2", "--iters", "10", "--warmup", "1", "--window", "4", "--settle", "0", "--validate", "-q")
	if err != nil {
		t.Errorf("bench -t auto without privileges: %v\n%s", err, out)
	}
	if left := launch.StaleSegments(); len(left) > 0 {
		t.Errorf("left in /dev/shm: %v", left)
	}
}
