package resultscheck

import (
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

// notData are the extensions of files that are not data: sources,
// scripts, diffs, and the Go benchmark view that gotune regenerates.
var notData = map[string]string{
	".py":    "a script (tools go under tools/, one-off ones stay out of the tree)",
	".sh":    "a script (tools go under tools/, one-off ones stay out of the tree)",
	".go":    "source (scratch programs stay out of the tree)",
	".c":     "source (scratch programs stay out of the tree)",
	".h":     "source (scratch programs stay out of the tree)",
	".diff":  "a diff (scratch stays out of the tree)",
	".patch": "a diff (scratch stays out of the tree)",
	".bench": "regenerable: gotune tune --bench FILE DIR writes a run's Go benchmark view from its store",
}

// dataExts are the extensions under which a source may hide (x.go.txt).
var dataExts = map[string]bool{".txt": true, ".log": true}

// problem says why the file at rel (slash-separated, under results/) is
// not data of record, or returns "".
func problem(rel string) string {
	name := filepath.Base(rel)
	ext := filepath.Ext(name)
	if why, ok := notData[ext]; ok {
		return why
	}
	if dataExts[ext] {
		if why, ok := notData[filepath.Ext(strings.TrimSuffix(name, ext))]; ok {
			return why + ", under a data extension"
		}
	}
	if strings.HasSuffix(name, "measurements.jsonl") {
		return "an uncompressed run store: check it in as gzip -9n " + name + " (" + name + ".gz)"
	}
	return ""
}

func TestProblem(t *testing.T) {
	for _, tc := range []struct {
		rel  string
		want string // a word of the reason; "" for data
	}{
		{"vm/spell/drv.py", "script"},
		{"vm/x/run.sh", "script"},
		{"vm/fill/zc2.c", "source"},
		{"vm/fill/zc2.h", "source"},
		{"vm/early/gprobe_test.go", "source"},
		{"vm/early/gprobe_test.go.txt", "under a data extension"},
		{"vm/copy/timing.diff", "diff"},
		{"vm/large/streamkeep.diff.txt", "under a data extension"},
		{"vm/x/fix.patch", "diff"},
		{"vm/20261122-031115/measurements.bench", "gotune tune --bench"},
		{"vm/20261122-031115/measurements.jsonl", "uncompressed"},
		{"gpu/s/sweep-measurements.jsonl", "uncompressed"},
		{"vm/20261122-031115/measurements.jsonl.gz", ""},
		{"vm/20261122-031115/meta.json", ""},
		{"vm/20261122-031115/summary", ""},
		{"vm/20261122-031115/profile.yaml", ""},
		{"vm/quarantine.jsonl", ""},
		{"anchors/vm-20261122-051106.jsonl", ""},
		{"vm/streams/pipe.txt", ""},
		{"gpu/b/tests-probes/gpu-tests.log.gz", ""},
		{"vm/README.md", ""},
		{"vm/bench.log", ""},
	} {
		got := problem(tc.rel)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("problem(%q) = %q, want one saying %q", tc.rel, got, tc.want)
		}
	}
}

// TestResultsHoldDataOnly names every file under results/ that is not
// data: those git tracks, where the module is a git work tree (a sweep's
// fresh run directory is not checked in yet, and may be made ready first:
// results/README.md says how), else every file but results/tmp/'s.
func TestResultsHoldDataOnly(t *testing.T) {
	files := resultFiles(t, testutil.ModuleRoot(t))
	if len(files) == 0 {
		t.Fatal("no files under results/")
	}
	for _, rel := range files {
		if why := problem(rel); why != "" {
			t.Errorf("results/%s: %s", rel, why)
		}
	}
}

// resultFiles lists the files under root/results/, slash-separated and
// relative to it.
func resultFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--", "results")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil && len(out) > 0 {
		var files []string
		for _, f := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
			files = append(files, strings.TrimPrefix(f, "results/"))
		}
		return files
	}
	dir := filepath.Join(root, "results")
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path) // path is under dir
		if d.IsDir() {
			if rel == "tmp" {
				return filepath.SkipDir
			}
			return nil
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return files
}
