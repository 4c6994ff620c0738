package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/profile"
)

// gotune report draws a checked-in run directory into --out and prints
// the report's path; several run directories need --out.
func TestReportCommand(t *testing.T) {
	root := testutil.ModuleRoot(t)
	run1 := filepath.Join(root, "results/catalogue/gpu-h200x2")
	out := t.TempDir()
	stdout, stderr, code := run(t, "report", "--out", out, run1)
	want := filepath.Join(out, "report.html") + "\n"
	if code != 0 || stdout != want {
		t.Fatalf("exit %d, stdout %q (want %q), stderr %s", code, stdout, want, stderr)
	}
	svgs, _ := filepath.Glob(filepath.Join(out, "*.svg"))
	if len(svgs) == 0 {
		t.Errorf("no plot written beside %s", want)
	}
	if _, stderr, code := run(t, "report", run1, run1); code == 0 || !strings.Contains(stderr, "--out") {
		t.Errorf("two run directories without --out: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := run(t, "report", filepath.Join(out, "none")); code == 0 || !strings.Contains(stderr, "meta.json") {
		t.Errorf("a directory without a run: exit %d, stderr %q", code, stderr)
	}
}

// verifyArgs is a verification short enough for a test: one round of auto
// and the single transports at two sizes, of a profile whose scope is any
// host (a catalogue entry's applies to its own machine only).
func verifyArgs(t *testing.T, out string) []string {
	path := filepath.Join(out, "profile.yaml")
	if _, err := os.Stat(path); err != nil {
		writeProfile(t, out, "profile.yaml", func(*profile.Profile) {})
	}
	return []string{"verify", path, "--rounds", "1", "--sizes", "8,4K", "--settle", "0", "--out", out}
}

// Without a terminal, verify's progress is plain lines: each trial as it
// ends and the stage's planned and done trials; it ends by writing the
// report into the run directory and saying where. --quiet drops the
// progress, --no-report the report.
func TestVerifyProgressLinesAndReport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real rank processes")
	}
	out := t.TempDir()
	_, stderr, code := run(t, verifyArgs(t, out)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"stage verify: ", " trials planned", "verify    auto ", " round 1 ", "verify: 5/5 trials", "run directory: ", "report: "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr has no %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "\x1b[") {
		t.Errorf("terminal control sequences without a terminal:\n%q", stderr)
	}
	path := lineAfter(stderr, "report: ")
	if _, err := os.Stat(path); err != nil || filepath.Dir(path) != lineAfter(stderr, "run directory: ") {
		t.Errorf("report %q: %v; want report.html in the run directory", path, err)
	}

	_, stderr, code = run(t, append(verifyArgs(t, out), "--quiet", "--no-report")...)
	if code != 0 {
		t.Fatalf("--quiet --no-report: exit %d: %s", code, stderr)
	}
	if strings.Contains(stderr, "round 1") || strings.Contains(stderr, "trials planned") || strings.Contains(stderr, "report: ") {
		t.Errorf("--quiet --no-report: stderr\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(lineAfter(stderr, "run directory: "), "report.html")); !os.IsNotExist(err) {
		t.Errorf("--no-report: report.html is there (%v)", err)
	}
}

// On a terminal (a pseudo-terminal, as a user's shows it) verify draws a
// progress bar for its stage with the trials done of planned (how often it
// redraws in place depends on the run's speed: internal/progress tests
// that), and the trials' lines above it.
func TestVerifyProgressBarOnTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real rank processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), cliEnv+"="+strings.Join(verifyArgs(t, t.TempDir()), "\x1f"))
	got, _ := onTerminal(t, func(tty *os.File) int {
		cmd.Stderr = tty
		err = cmd.Run()
		return 0
	})
	if err != nil {
		t.Fatalf("verify on a terminal: %v\n%s", err, got)
	}
	for _, want := range []string{"verify ", "5/5 [===", "5 trials done", "round 1", "report: "} {
		if !strings.Contains(got, want) {
			t.Errorf("the terminal shows no %q:\n%q", want, got)
		}
	}
	if strings.Contains(got, "trials planned") {
		t.Errorf("plain progress lines on a terminal:\n%q", got)
	}
}

// lineAfter returns the rest of the first line of s that starts with prefix.
func lineAfter(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			return v
		}
	}
	return ""
}

// compare --html draws two verifications' run directories (their auto
// trials) overlaid with a ratio plot, besides printing the table.
func TestCompareHTMLOfRunDirectories(t *testing.T) {
	root := testutil.ModuleRoot(t)
	out := t.TempDir()
	a := "a=" + filepath.Join("testdata", "verify-a")
	b := "b=" + filepath.Join("testdata", "verify-b")
	stdout, stderr, code := run(t, "compare", "--html", out, a, b)
	if code != 0 || !strings.Contains(stdout, "geomean ratio") {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	if got := lineAfter(stderr, "report: "); got != filepath.Join(out, "report.html") {
		t.Errorf("report path %q, stderr:\n%s", got, stderr)
	}
	for _, f := range []string{"report.html", "compare-bw-mb-s.svg", "compare-bw-mb-s-ratio.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// A sweep's run directory whose verification the budget cut has no
	// auto trials to compare.
	empty := filepath.Join(root, "results/catalogue/gpu-h200x2")
	if _, stderr, code := run(t, "compare", a, "c="+empty); code == 0 || !strings.Contains(stderr, "no verification trials of auto") {
		t.Errorf("a run without auto trials: exit %d, stderr %q", code, stderr)
	}
}
