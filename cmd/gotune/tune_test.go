package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotune/gotune/tuner/sweep"
)

// tinyRunDir is a verification's run directory with one trial of two
// sizes, its store compressed as in the catalogue.
func tinyRunDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vm", "20261122-031507")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := `{"run_id":"20261122-031507","command":"gotune verify p.yaml","started":"2026-11-22T03:15:07Z",
"provenance":{"host":"vm","cpu_model":"AMD EPYC","cores":2,"numa_nodes":1,"kernel":"6.18.44","go_version":"go1.26.8","gotune_version":"153dcd7","time":"2026-11-22T03:15:07Z"},
"plan":{"name":"quick"},"verify":{"profile":"p.yaml","hash":"sha256:29fb"}}`
	trial := `{"key":"trial:0845c0be4438417d473ff3d5","kind":"trial","time":"2026-11-22T03:15:08.844643522Z","data":{"stage":"verify","candidate":"sm","transport":"sm","pattern":"bw","sizes":[1,1024],"round":1,"points":[` +
		`{"size":1,"iters":100,"warmup":10,"unit":"MB/s","samples":[14.08,14.11,14.04],"median":14.08,"ci_low":14.04,"ci_high":14.11,"confidence":0.75},` +
		`{"size":1024,"iters":100,"warmup":10,"unit":"MB/s","samples":[2048,1024,4096],"median":2048,"ci_low":1024,"ci_high":4096,"confidence":0.75}],"seconds":1.5}}` + "\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(trial))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{sweep.MetaFile: []byte(meta), sweep.MeasurementsFile + ".gz": gz.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// gotune tune --bench writes a run directory's Go benchmark view, to a
// file or stdout, and nothing into the directory.
func TestTuneBench(t *testing.T) {
	dir := tinyRunDir(t)
	var want bytes.Buffer
	if err := sweep.WriteBench(dir, &want); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"label: verify sm", "BenchmarkBW/transport=sm/size=1024 100 500 ns/op 2048 MB/s"} {
		if !strings.Contains(want.String(), line+"\n") {
			t.Fatalf("bench view lacks %q:\n%s", line, want.String())
		}
	}
	file := filepath.Join(t.TempDir(), "run.bench")
	for _, tc := range []struct {
		name, to string
		out      func(stdout string) string
	}{
		{"stdout", "-", func(stdout string) string { return stdout }},
		{"file", file, func(string) string { b, _ := os.ReadFile(file); return string(b) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := run(t, "tune", "--bench", tc.to, dir)
			if code != 0 {
				t.Fatalf("tune --bench %s: exit %d: %s", tc.to, code, stderr)
			}
			if got := tc.out(stdout); got != want.String() {
				t.Fatalf("tune --bench %s wrote:\n%s\nwant:\n%s", tc.to, got, want.String())
			}
			if left, _ := os.ReadDir(dir); len(left) != 2 {
				t.Fatalf("tune --bench wrote into %s: %d entries", dir, len(left))
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, stderr, code := run(t, "tune", "--bench", "-", missing); code == 0 || !strings.Contains(stderr, missing) {
		t.Fatalf("tune --bench of a missing directory: exit %d, %q; want a failure naming %s", code, stderr, missing)
	}
}
