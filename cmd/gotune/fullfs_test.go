package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/tuner/sweep"
)

// A sweep whose results fill their filesystem stops with an error naming
// the file and the cause, leaves no half-written file but the store's torn
// last record, and once there is room, --resume completes it.
func TestSweepOnAFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real rank processes")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "small")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	testutil.MountTmpfs(t, mnt, "size=24k")
	plan := filepath.Join(dir, "small.yaml")
	if err := os.WriteFile(plan, []byte(smallPlanYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, "sweep", "--plan", plan, "--out", filepath.Join(mnt, "results"), "-q", "--no-report")
	if code == 0 || !strings.Contains(stderr, "no space left on device") || !strings.Contains(stderr, sweep.MeasurementsFile) {
		t.Fatalf("a sweep on a full disk: exit %d, stderr %q; want an error naming %s and the cause", code, stderr, sweep.MeasurementsFile)
	}
	runs, _ := filepath.Glob(filepath.Join(mnt, "results", "*", "2*"))
	if len(runs) != 1 {
		t.Fatalf("run directories %v", runs)
	}
	entries, _ := os.ReadDir(runs[0])
	for _, e := range entries {
		if name := e.Name(); name != sweep.MeasurementsFile && name != sweep.MetaFile {
			t.Errorf("left in the run directory: %s", name)
		}
	}
	if out, err := exec.Command("mount", "-o", "remount,size=2m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("make room: %v: %s", err, out)
	}
	if _, stderr, code := run(t, "sweep", "--resume", runs[0], "-q", "--no-report"); code != 0 {
		t.Fatalf("resume once there is room: exit %d: %s", code, stderr)
	}
	if _, err := profile.Load(filepath.Join(runs[0], sweep.ProfileFile)); err != nil {
		t.Fatal(err)
	}
}

// A sweep whose results directory is read-only fails before it measures,
// naming the directory and the cause.
func TestSweepOnAReadOnlyFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a read-only tmpfs")
	}
	mnt := t.TempDir()
	testutil.MountTmpfs(t, mnt, "ro,size=1m")
	_, stderr, code := run(t, "sweep", "--plan", "quick", "--out", filepath.Join(mnt, "results"), "-q", "--no-report")
	if code == 0 || !strings.Contains(stderr, "read-only file system") || !strings.Contains(stderr, mnt) {
		t.Fatalf("a sweep on a read-only filesystem: exit %d, stderr %q; want an error naming %s and the cause", code, stderr, mnt)
	}
	if entries, _ := os.ReadDir(mnt); len(entries) > 0 {
		t.Errorf("left on the read-only filesystem: %v", entries)
	}
}
