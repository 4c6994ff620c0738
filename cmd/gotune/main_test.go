package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports/cudaipc"
)

func TestMain(m *testing.M) {
	launch.MaybeRunRank() // ranks re-execute this test binary
	if args, ok := os.LookupEnv(cliEnv); ok {
		// The test binary plays the gotune command (for kill -9 tests).
		os.Exit(Main(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// cliEnv makes the test binary run Main with these (unit-separated) args.
const cliEnv = "GOTUNE_TEST_CLI_ARGS"

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(args, &o, &e)
	return o.String(), e.String(), code
}

// The acceptance commands, with short loops: OSU's shape, line by line.
func TestBenchOSUFormat(t *testing.T) {
	cases := []struct {
		args   []string
		header string
		sizes  []string
	}{
		{[]string{"bench", "--transport", "sm", "--pattern", "latency", "--sizes", "8", "--format", "osu"},
			"# Size       Avg Latency(us)", []string{"8"}},
		{[]string{"bench", "--transport", "cma", "--pattern", "bw", "--sizes", "4K:16K", "--format", "osu"},
			"# Size      Bandwidth (MB/s)", []string{"4096", "8192", "16384"}},
	}
	row := regexp.MustCompile(`^(\d+) +(\d+\.\d\d)$`)
	for _, c := range cases {
		out, errOut, code := run(t, append(c.args, "--reps", "2", "--iters", "20", "--warmup", "2")...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errOut)
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if len(lines) != 2+len(c.sizes) || !strings.HasPrefix(lines[0], "# ") || lines[1] != c.header {
			t.Fatalf("%v: output\n%s", c.args, out)
		}
		for i, size := range c.sizes {
			m := row.FindStringSubmatch(lines[2+i])
			if m == nil || m[1] != size || len(lines[2+i]) != 28 {
				t.Errorf("%v: row %q: want size %s in OSU's %%-10d%%18.2f shape", c.args, lines[2+i], size)
			}
		}
	}
}

func TestOutAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.csv")
	for range 2 {
		if _, e, code := run(t, "bench", "-s", "8", "--reps", "1", "--iters", "10", "-f", "csv", "-o", path); code != 0 {
			t.Fatal(e)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "label,transport"); n != 2 {
		t.Errorf("%d headers in %s, want 2 (one per run, appended)", n, path)
	}
}

func TestBadInputNamesTheCulprit(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--pattern", "pingpong"}, "--pattern"},
		{[]string{"bench", "--sizes", "1:x"}, "--sizes"},
		{[]string{"bench", "--format", "xml"}, "--format"},
		{[]string{"bench", "--cpus", "0"}, "--cpus"},
		{[]string{"bench", "--opt", "sm.depth=0"}, "sm.depth=0"},
		{[]string{"bench", "--opt", "sm.dpeth=4"}, "sm.dpeth"},
		{[]string{"bench", "--opt", "novalue"}, "--opt"},
		{[]string{"bench", "-t", "shmem"}, `unknown transport "shmem"`},
		{[]string{"bench", "--segment", "sysv", "-s", "8"}, "sysv"},
		{[]string{"bench", "--mem", "gpu"}, `--mem: unknown memory kind "gpu"`},
		{[]string{"bench", "--mem", "H,D,H"}, "--mem"},
		{[]string{"bench", "--mem", "pool"}, "--mem"},
		{[]string{"bench", "--mem", "managed", "-p", "alloc"}, "--mem managed: the alloc pattern"},
		{[]string{"bench", "--gpus", "0,x"}, "--gpus"},
		{[]string{"bench", "--gpus", "-1"}, "--gpus"},
		{[]string{"bench", "--kernel", "lots"}, "--kernel"},
		{[]string{"bench", "--kernel", "full"}, "--kernel full: the load kernel runs on the ranks' GPUs, and with --mem host on both ranks and no --gpus"},
		{[]string{"bench", "--kernel", "30%", "--mem", "host,host"}, "--kernel 30%"},
		{[]string{"bench", "--gpus", "0,1", "--opt", "cudaipc.gpus=1,0"}, "--gpus 0,1 disagrees with --opt cudaipc.gpus=1,0"},
		{[]string{"bench", "-p", "bw", "--floor"}, "--floor: the floor is a one-way latency"},
		{[]string{"bench", "-f", "csv", "--floor"}, "--floor: prints with --format table, osu, bench"},
		{[]string{"bench", "--cpus", "none", "--floor"}, "--floor: needs the ranks pinned"},
	}
	for _, c := range cases {
		_, e, code := run(t, c.args...)
		if code == 0 || !strings.Contains(e, c.want) {
			t.Errorf("%v: exit %d, stderr %q: want an error naming %q", c.args, code, e, c.want)
		}
	}
}

func TestDoctorAndVersion(t *testing.T) {
	out, e, code := run(t, "doctor")
	if code != 0 || !regexp.MustCompile(`(?m)^sm +available$`).MatchString(out) || !regexp.MustCompile(`(?m)^cma +`).MatchString(out) {
		t.Errorf("doctor: exit %d\n%s%s", code, out, e)
	}
	out, _, code = run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "gotune ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
}

// gotune probe's contract: one verdict line; exit 0 passed, 3 hazard.
func TestProbeExitStatus(t *testing.T) {
	out, e, code := run(t, "probe", "H5")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "H5 safe: passed") {
		t.Errorf("safe: exit %d, stdout %q, stderr %q", code, out, e)
	}
	out, e, code = run(t, "probe", "H5", "--unsafe", "--deadline", "500ms")
	if code != 3 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "H5 unsafe: hazard detected") {
		t.Errorf("unsafe: exit %d, stdout %q, stderr %q", code, out, e)
	}
	if _, e, code = run(t, "probe", "H42"); code != 1 || !strings.Contains(e, `unknown probe "H42"`) {
		t.Errorf("unknown probe: exit %d, stderr %q", code, e)
	}
	out, _, code = run(t, "probe", "--list")
	for _, id := range []string{"H1", "H3", "H5", "H6", "H8"} {
		if code != 0 || !regexp.MustCompile(`(?m)^`+id+` `).MatchString(out) {
			t.Errorf("--list: exit %d, no line for %s: %q", code, id, out)
		}
	}
}

// --mem, --gpus and --kernel as the bench command reads them into its Spec
// (nothing here loads CUDA: the checks against the driver are Run's).
func TestGPUFlags(t *testing.T) {
	const (
		H = cuda.MemHost
		P = cuda.MemPinned
		D = cuda.MemDevice
	)
	cases := []struct {
		args []string
		mem  []cuda.MemKind
		gpus []int
		load float64
		opt  string // cudaipc.gpus passed to the transport
	}{
		{args: nil},
		{args: []string{"--mem", "host"}},
		{args: []string{"--mem", "H,H"}},
		{args: []string{"--mem", "device"}, mem: []cuda.MemKind{D, D}},
		{args: []string{"--mem", "D"}, mem: []cuda.MemKind{D, D}},
		{args: []string{"--mem", "H,D"}, mem: []cuda.MemKind{H, D}},
		{args: []string{"--mem", "pinned,host"}, mem: []cuda.MemKind{P, H}},
		{args: []string{"--mem", "MD,MH"}, mem: []cuda.MemKind{cuda.MemManagedDevice, cuda.MemManagedHost}},
		{args: []string{"--mem", "D", "--gpus", "1,0"}, mem: []cuda.MemKind{D, D}, gpus: []int{1, 0}, opt: "1,0"},
		{args: []string{"--gpus", "0"}, mem: []cuda.MemKind{H, H}, gpus: []int{0}, opt: "0"},
		{args: []string{"--gpus", "0", "--opt", "cudaipc.gpus=0"}, mem: []cuda.MemKind{H, H}, gpus: []int{0}, opt: "0"},
		{args: []string{"--opt", "cudaipc.gpus=1,0"}, mem: []cuda.MemKind{H, H}, gpus: []int{1, 0}, opt: "1,0"},
		{args: []string{"--mem", "device", "--kernel", "partial"}, mem: []cuda.MemKind{D, D}, load: 0.5},
		{args: []string{"--gpus", "0", "--kernel", "full"}, mem: []cuda.MemKind{H, H}, gpus: []int{0}, load: 1, opt: "0"},
		{args: []string{"--mem", "H,D", "--kernel", "0.3"}, mem: []cuda.MemKind{H, D}, load: 0.3},
		{args: []string{"--mem", "D", "--kernel", "25%"}, mem: []cuda.MemKind{D, D}, load: 0.25},
		{args: []string{"--mem", "D", "--kernel", "none"}, mem: []cuda.MemKind{D, D}},
	}
	for _, c := range cases {
		var f benchFlags
		cmd := &cobra.Command{}
		f.register(cmd)
		if err := cmd.ParseFlags(append([]string{"--cpus", "none", "-s", "8", "-t", "cudaipc"}, c.args...)); err != nil {
			t.Fatal(err)
		}
		s, err := f.spec(io.Discard)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if !reflect.DeepEqual(s.Mem, c.mem) || !reflect.DeepEqual(s.GPUs, c.gpus) || s.GPULoad != c.load || s.Options[cudaipc.KeyGPUs] != c.opt {
			t.Errorf("%v: mem %v gpus %v load %v options %v; want mem %v gpus %v load %v %s=%q",
				c.args, s.Mem, s.GPUs, s.GPULoad, s.Options, c.mem, c.gpus, c.load, cudaipc.KeyGPUs, c.opt)
		}
	}
}

// Asking for GPU memory where there is no driver fails before any rank
// starts, and says why.
func TestGPUMemoryWithoutDriver(t *testing.T) {
	if err := cuda.Load(); err == nil {
		t.Skip("a CUDA driver is present here")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-t", "cudaipc", "--mem", "device"}, "gotune: bench: --mem device: CUDA not available: "},
		{[]string{"--mem", "H,MD"}, "gotune: bench: --mem managed-device: CUDA not available: "},
		{[]string{"--gpus", "0", "--kernel", "partial"}, "gotune: bench: --gpus 0: CUDA not available: "},
	} {
		_, e, code := run(t, append([]string{"bench", "-s", "8"}, c.args...)...)
		if code != 1 || !strings.HasPrefix(e, c.want) || !strings.Contains(e, "not supported") {
			t.Errorf("%v: exit %d, stderr %q; want %q and the driver's reason", c.args, code, e, c.want)
		}
	}
}

// A host-only transport refuses device buffers before anything starts: its
// CPU copies would fault on them.
func TestHostTransportRefusesDeviceMemory(t *testing.T) {
	_, e, code := run(t, "bench", "-t", "sm", "-s", "8", "--mem", "H,D")
	if code != 1 || !strings.Contains(e, "--mem device: transport sm moves host memory only") {
		t.Errorf("exit %d, stderr %q", code, e)
	}
}
