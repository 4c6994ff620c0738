package gpu

import (
	"bytes"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

// Without the library NVML is not supported, on any machine.
func TestNVMLMissingLibrary(t *testing.T) {
	s, err := openNVML("/nonexistent/libnvidia-ml.so.1")
	if err == nil {
		s.Close()
		t.Fatal("opened NVML from a library that does not exist")
	}
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "/nonexistent/libnvidia-ml.so.1") {
		t.Errorf("error %v: want one matching ErrNotSupported that names the library", err)
	}
}

// openOrSkip opens the real NVML. Where it is absent (the build machines)
// the error must match ErrNotSupported and name the library; then the test
// skips, unless GOTUNE_REQUIRE names gpu.
func openOrSkip(t *testing.T) *NVML {
	t.Helper()
	s, err := OpenNVML()
	if err != nil {
		if !errors.Is(err, ErrNotSupported) {
			t.Fatalf("OpenNVML: %v: want an error matching ErrNotSupported where NVML cannot be used", err)
		}
		if !strings.Contains(err.Error(), "NVML") {
			t.Errorf("OpenNVML: %v: want the reason to say NVML", err)
		}
		testutil.SkipUnless(t, "gpu", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
	return s
}

// On a machine with NVIDIA GPUs: facts are well formed and the matrix and
// affinity columns agree with nvidia-smi topo -m.
func TestNVMLHardware(t *testing.T) {
	s := openOrSkip(t)
	topo, err := Discover(s)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := topo.Format(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("gotune's view:\n%s", &b)
	busRE := regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	for _, d := range topo.Devices {
		if d.Name == "" || !strings.HasPrefix(d.UUID, "GPU-") || !busRE.MatchString(d.BusID) {
			t.Errorf("GPU%d: name %q uuid %q bus %q", d.Index, d.Name, d.UUID, d.BusID)
		}
		t.Logf("GPU%d: affinity from %s", d.Index, d.AffinityFrom)
	}
	for _, p := range topo.Pairs {
		t.Logf("GPU%d-GPU%d: %s, ancestor %s, P2P read %s write %s nvlink %s",
			p.GPUs[0], p.GPUs[1], p.Label(), p.Ancestor, p.P2P.Read, p.P2P.Write, p.P2P.NVLink)
	}
	if _, err := s.Device(len(topo.Devices)); err == nil {
		t.Error("Device past the last GPU: no error")
	}

	out, err := exec.Command("nvidia-smi", "topo", "-m").Output()
	if err != nil {
		t.Skipf("no nvidia-smi topo -m to compare with: %v", err)
	}
	t.Logf("nvidia-smi topo -m:\n%s", out)
	rows, err := parseSMITopo(string(out))
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range topo.Devices {
		r, ok := rows["GPU"+strconv.Itoa(i)]
		if !ok {
			t.Errorf("nvidia-smi has no row GPU%d", i)
			continue
		}
		for j := range topo.Devices {
			want := "X"
			if p, ok := topo.Pair(i, j); ok {
				want = p.Label()
			}
			if got := r.cells["GPU"+strconv.Itoa(j)]; got != want {
				t.Errorf("GPU%d-GPU%d: nvidia-smi says %s, gotune %s", i, j, got, want)
			}
		}
		node := "N/A"
		if d.NUMANode >= 0 {
			node = strconv.Itoa(d.NUMANode)
		}
		if r.cpus != d.CPUs.String() || r.node != node {
			t.Errorf("GPU%d: nvidia-smi says CPUs %q NUMA %q, gotune %q %q", i, r.cpus, r.node, d.CPUs, node)
		}
	}
}

type smiRow struct {
	cells      map[string]string // column (GPU0, NIC0, ...) -> cell
	cpus, node string
}

// parseSMITopo reads nvidia-smi topo -m's matrix: a header of GPU#/NIC#
// columns then "CPU Affinity", "NUMA Affinity"...; a row per device.
func parseSMITopo(out string) (map[string]smiRow, error) {
	out = regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(out, "")
	lines := strings.Split(out, "\n")
	devRE := regexp.MustCompile(`^(GPU|NIC)\d+$`)
	var cols []string
	rows := map[string]smiRow{}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if cols == nil {
			if devRE.MatchString(f[0]) { // the header: its first cell is empty
				for _, c := range f {
					if !devRE.MatchString(c) {
						break
					}
					cols = append(cols, c)
				}
			}
			continue
		}
		if !devRE.MatchString(f[0]) {
			break // the legend
		}
		if len(f) < 1+len(cols)+2 {
			continue // a NIC row without affinity columns, say
		}
		r := smiRow{cells: map[string]string{}, cpus: f[1+len(cols)], node: f[2+len(cols)]}
		for k, c := range cols {
			r.cells[c] = f[1+k]
		}
		rows[f[0]] = r
	}
	if cols == nil {
		return nil, errors.New("no GPU columns in nvidia-smi topo -m's output")
	}
	return rows, nil
}

func TestParseSMITopo(t *testing.T) {
	out := "\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n" +
		"GPU0\t X \tNV18\tSYS\t0-47,96-143\t0\t\tN/A\n" +
		"GPU1\tNV18\t X \tSYS\t48-95,144-191\t1\t\tN/A\n" +
		"NIC0\tSYS\tSYS\t X \t\t\t\t\n\nLegend:\n\n  X    = Self\n"
	rows, err := parseSMITopo(out)
	if err != nil {
		t.Fatal(err)
	}
	if r := rows["GPU1"]; r.cells["GPU0"] != "NV18" || r.cells["GPU1"] != "X" || r.cpus != "48-95,144-191" || r.node != "1" {
		t.Errorf("GPU1 row: %+v", r)
	}
	if len(rows) != 2 {
		t.Errorf("%d rows, want 2 (the NIC row has no affinity)", len(rows))
	}
}
