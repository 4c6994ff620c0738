package torch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/sys"
)

// ScriptPath is where the baselines script sits in a gotune checkout.
const ScriptPath = "scripts/gpu/baselines.py"

// Baselines is PyTorch's NCCL send/recv measured by the baselines script
// with a Python interpreter that imports torch.
type Baselines struct {
	Python, Script string
}

// measurements are the script's measurement of each pattern it runs: the
// window of isend/irecv with an ack (osu_bw), and the host-synchronized
// ping-pong (osu_latency).
var measurements = map[bench.Pattern]string{
	bench.Bandwidth: "nccl_sendrecv_bw",
	bench.Latency:   "nccl_sendrecv_lat",
}

// Find locates the script (script, or ScriptPath under the working
// directory or under the directory above the running executable's: a
// checkout's bin/gotune) and checks that python imports torch and sees
// two GPUs. What is missing is sys.ErrNotSupported, naming it.
func Find(ctx context.Context, python, script string) (Baselines, error) {
	if script == "" {
		cands := []string{ScriptPath}
		if exe, err := os.Executable(); err == nil {
			cands = append(cands, filepath.Join(filepath.Dir(filepath.Dir(exe)), ScriptPath))
		}
		for _, c := range cands {
			if _, err := os.Stat(c); err == nil {
				script = c
				break
			}
		}
		if script == "" {
			return Baselines{}, sys.NotSupported("torch", fmt.Sprintf("no %s here or beside the gotune binary (name it with --torch-script)", ScriptPath), nil)
		}
	} else if _, err := os.Stat(script); err != nil {
		return Baselines{}, fmt.Errorf("torch script: %w", err)
	}
	py, err := exec.LookPath(python)
	if err != nil {
		return Baselines{}, sys.NotSupported("torch", python+" not found", err)
	}
	out, err := exec.CommandContext(ctx, py, "-c", "import torch; print(torch.cuda.device_count())").CombinedOutput()
	if err != nil {
		return Baselines{}, sys.NotSupported("torch", fmt.Sprintf("%s cannot import torch: %s", python, lastLine(out)), err)
	}
	if n, _ := strconv.Atoi(lastLine(out)); n < 2 {
		return Baselines{}, sys.NotSupported("torch", fmt.Sprintf("torch sees %s CUDA device(s); its NCCL pair needs 2", lastLine(out)), nil)
	}
	return Baselines{Python: py, Script: script}, nil
}

// Run measures spec (latency or bw; its sizes, one repetition each
// unless Reps says more) through PyTorch's NCCL between cuda:0 and cuda:1.
func (b Baselines) Run(ctx context.Context, spec bench.Spec) (bench.Result, error) {
	name, ok := measurements[spec.Pattern]
	if !ok {
		return bench.Result{}, fmt.Errorf("torch: no baseline for pattern %s (latency and bw have one)", spec.Pattern)
	}
	if len(spec.Sizes) == 0 {
		return bench.Result{}, errors.New("torch: no message sizes")
	}
	out, err := os.CreateTemp("", "gotune-torch-*.jsonl")
	if err != nil {
		return bench.Result{}, err
	}
	out.Close()
	defer os.Remove(out.Name())
	sizes := make([]string, len(spec.Sizes))
	for i, n := range spec.Sizes {
		if n <= 0 {
			return bench.Result{}, fmt.Errorf("torch: size %d: the script measures sizes above 0", n)
		}
		sizes[i] = strconv.Itoa(n)
	}
	sizeFlag := "--sizes"
	if spec.Pattern == bench.Latency {
		sizeFlag = "--lat-sizes"
	}
	reps := max(spec.Reps, 1)
	args := []string{b.Script, "--only", name, sizeFlag, strings.Join(sizes, ","), "--reps", strconv.Itoa(reps), "--out", out.Name()}
	if spec.Window > 0 && spec.Pattern == bench.Bandwidth {
		args = append(args, "--window", strconv.Itoa(spec.Window))
	}
	cmd := exec.CommandContext(ctx, b.Python, args...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return bench.Result{}, fmt.Errorf("torch: %s %s: %w\n%s", b.Python, strings.Join(args, " "), err, tail(log.Bytes()))
	}
	f, err := os.Open(out.Name())
	if err != nil {
		return bench.Result{}, err
	}
	defer f.Close()
	points, libs, err := parse(f, name, spec.Pattern.Unit(), spec.Sizes)
	if err != nil {
		return bench.Result{}, fmt.Errorf("torch: %s: %w", b.Script, err)
	}
	prov := hostinfo.Collect("/")
	prov.Libraries = libs
	return bench.Result{Label: "torch", Provenance: prov, Points: points,
		Spec: bench.Spec{Transport: "torch", Pattern: spec.Pattern, Sizes: spec.Sizes, Reps: reps, Window: spec.Window}}, nil
}

// record is one line of the script's --out.
type record struct {
	Name   string  `json:"name"`
	Size   int     `json:"size"`
	Unit   string  `json:"unit"`
	Median float64 `json:"median"`
	Reps   int     `json:"reps"`
	Iters  int     `json:"iters"`
	Torch  string  `json:"torch"`
	NCCL   string  `json:"nccl"`
	CUDA   string  `json:"cuda"`
}

// parse reads the script's JSON lines for measurement name into one point
// per size of sizes, in unit (the script's GB/s read as MB/s), each the
// script's median as the sample; the libraries it ran are returned too.
func parse(r io.Reader, name, unit string, sizes []int) ([]bench.Point, map[string]string, error) {
	got := map[int]record{}
	var libs map[string]string
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		var rec record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", line, err)
		}
		if rec.Name != name {
			continue
		}
		got[rec.Size] = rec
		libs = map[string]string{"torch": rec.Torch, "nccl": rec.NCCL, "cuda": rec.CUDA}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	var points []bench.Point
	for _, n := range sizes {
		rec, ok := got[n]
		if !ok {
			return nil, nil, fmt.Errorf("no %s line for size %d", name, n)
		}
		v, err := inUnit(rec.Median, rec.Unit, unit)
		if err != nil {
			return nil, nil, fmt.Errorf("%s at size %d: %w", name, n, err)
		}
		p := bench.Summarize(n, unit, []float64{v}, nil)
		p.Iters = rec.Iters
		points = append(points, p)
	}
	return points, libs, nil
}

// inUnit converts v from the script's unit to the pattern's.
func inUnit(v float64, from, to string) (float64, error) {
	switch {
	case from == to:
		return v, nil
	case from == "GB/s" && to == "MB/s":
		return v * 1000, nil
	}
	return 0, fmt.Errorf("unit %q, want %q", from, to)
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// tail is the last lines of a failed run's output.
func tail(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(len(lines)-20, 0):], "\n")
}
