package torch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/sys"
)

// The script's lines become one point per size in the pattern's unit;
// lines of other measurements are passed over; a missing size or a
// broken line is an error naming it.
func TestParse(t *testing.T) {
	lines, err := os.ReadFile("testdata/baselines.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	points, libs, err := parse(strings.NewReader(string(lines)), "nccl_sendrecv_bw", "MB/s", []int{1024, 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 2 || points[0].Median != 61.5 || points[1].Median != 290400 || points[1].Unit != "MB/s" || points[1].Iters != 20 {
		t.Errorf("points %+v, want 61.5 and 290400 MB/s", points)
	}
	if libs["torch"] != "2.11.0+cu130" || libs["nccl"] != "2.28.9" {
		t.Errorf("libraries %v", libs)
	}
	for _, c := range []struct {
		in, name, unit string
		sizes          []int
		want           string
	}{
		{string(lines), "nccl_sendrecv_bw", "MB/s", []int{4096}, "no nccl_sendrecv_bw line for size 4096"},
		{string(lines), "nccl_sendrecv_lat", "MB/s", []int{8}, `unit "us", want "MB/s"`},
		{"{\"name\": \"x\"}\nnot json\n", "x", "us", []int{8}, "line 2:"},
	} {
		if _, _, err := parse(strings.NewReader(c.in), c.name, c.unit, c.sizes); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want an error with %q", c.name, c.sizes, err, c.want)
		}
	}
}

// Run hands the script its measurement, sizes, repetitions and window, and
// reads what it wrote (a stand-in for python and the script here).
func TestRunPassesTheSpec(t *testing.T) {
	dir := t.TempDir()
	args := filepath.Join(dir, "args")
	python := filepath.Join(dir, "python")
	stand := `#!/bin/sh
echo "$@" > ` + args + `
while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
cp ` + filepath.Join(mustAbs(t, "testdata"), "baselines.jsonl") + ` "$out"
`
	if err := os.WriteFile(python, []byte(stand), 0o755); err != nil {
		t.Fatal(err)
	}
	b := Baselines{Python: python, Script: "baselines.py"}
	res, err := b.Run(t.Context(), bench.Spec{Pattern: bench.Bandwidth, Sizes: []int{1024, 16 << 20}, Reps: 1, Window: 64})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(args)
	if want := "baselines.py --only nccl_sendrecv_bw --sizes 1024,16777216 --reps 1 --out "; !strings.HasPrefix(string(got), want) || !strings.Contains(string(got), "--window 64") {
		t.Errorf("script arguments %q, want %q... --window 64", got, want)
	}
	if res.Label != "torch" || len(res.Points) != 2 || res.Provenance.Libraries["nccl"] != "2.28.9" {
		t.Errorf("result %s, %d points, libraries %v", res.Label, len(res.Points), res.Provenance.Libraries)
	}
	lat, err := b.Run(t.Context(), bench.Spec{Pattern: bench.Latency, Sizes: []int{8}})
	if err != nil || lat.Points[0].Median != 61.2 {
		t.Fatalf("latency: %v, %+v", err, lat.Points)
	}
	if got, _ := os.ReadFile(args); !strings.Contains(string(got), "--lat-sizes 8 ") {
		t.Errorf("latency arguments %q, want --lat-sizes 8", got)
	}
	if _, err := b.Run(t.Context(), bench.Spec{Pattern: bench.AllToAll, Sizes: []int{8}}); err == nil {
		t.Error("alltoall ran; the script has no baseline for it")
	}
}

// Without python, or a script, Find says what is missing as not supported.
func TestFindSaysWhatIsMissing(t *testing.T) {
	t.Chdir(t.TempDir())
	if _, err := Find(t.Context(), "python3", ""); !errors.Is(err, sys.ErrNotSupported) || !strings.Contains(err.Error(), ScriptPath) {
		t.Errorf("no script: %v, want not supported naming %s", err, ScriptPath)
	}
	if err := os.WriteFile("b.py", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(t.Context(), "no-such-python-here", "b.py"); !errors.Is(err, sys.ErrNotSupported) || !strings.Contains(err.Error(), "no-such-python-here") {
		t.Errorf("no python: %v, want not supported naming it", err)
	}
}

func mustAbs(t *testing.T, p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
