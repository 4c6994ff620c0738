package htmlreport

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/compare"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/testutil"
)

var _ = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or writes it there with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testutil.GoldenFile(t, name, got)
}

// A chart with every element the report draws (bands, a chosen line, a
// decision, a bound, size ranges) draws the same SVG as before: gonum's
// SVG output is deterministic.
func TestChartSVGGolden(t *testing.T) {
	c := chart{title: "transport: bw", xlabel: "message size (bytes)", ylabel: "bandwidth (MB/s), higher is better",
		sizeX: true, logY: true,
		lines: []line{
			{label: "sm", pts: []xy{{4096, 9000, 8500, 9400}, {65536, 15000, 14000, 16000}, {1 << 20, 14000, 13000, 15500}}},
			{label: "cma", bold: true, pts: []xy{{4096, 5000, 4800, 5300}, {65536, 20000, 19000, 21000}, {1 << 20, 30000, 29000, 31000}}},
		},
		vmarks:  []vmark{{x: 32768, label: "→ cma from 32K"}},
		hmarks:  []hmark{{y: 12000, label: "a bound"}},
		regions: []region{{from: 1, to: 32768, label: "sm pipeline"}, {from: 32768, to: math.Inf(1), label: "cma rendezvous"}},
	}
	svg, err := c.svg()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "chart.svg", svg)
	for _, want := range []string{"transport: bw", "cma (chosen)", "→ cma from 32K", "sm pipeline", "32K", "20000"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the SVG has no %q", want)
		}
	}
	if _, err := (chart{title: "empty", sizeX: true, logY: true}).svg(); err == nil {
		t.Error("a chart without points drew")
	}
}

// Ticks: sizes at powers of two labelled as sizes, at most about eight
// labelled; plain values with the digits that tell them apart.
func TestTicks(t *testing.T) {
	labels := func(ts []plot.Tick) []string {
		var out []string
		for _, tk := range ts {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	for _, c := range []struct {
		name   string
		ticks  []plot.Tick
		labels []string
	}{
		{"sizes", sizeTicks{format: sizeLabel}.Ticks(8, 1<<20), []string{"8", "64", "512", "4K", "32K", "256K"}},
		{"few sizes", sizeTicks{format: sizeLabel}.Ticks(1<<10, 1<<13), []string{"1K", "2K", "4K", "8K"}},
		{"ranks", sizeTicks{format: func(v int) string { return fmt.Sprint(v) }}.Ticks(2, 16), []string{"2", "4", "8", "16"}},
		{"decades", logTicks{}.Ticks(3, 900), []string{"5", "10", "20", "50", "100", "200", "500"}},
		{"narrow", logTicks{}.Ticks(13000, 25000), []string{"15000", "20000", "25000"}},
		{"ratios", linearTicks{}.Ticks(0.97, 1.07), []string{"0.98", "1.02", "1.06"}},
		{"rates", logTicks{}.Ticks(1e6, 2e7), []string{"1M", "2M", "5M", "10M", "20M"}},
	} {
		if got := labels(c.ticks); !slices.Equal(got, c.labels) {
			t.Errorf("%s: labels %q, want %q", c.name, got, c.labels)
		}
	}
}

// structure is what a report is made of, without its numbers: headings,
// plots with their titles, axes and legends, and tables' headers. The
// golden files hold it, so that a change of what the report shows is a
// diff to review.
func structure(t *testing.T, dir string) string {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	tag := regexp.MustCompile(`(?s)<h([1-3])[^>]*>(.*?)</h[1-3]>|<figure class="plot" id="[^"]*" data-plot="([^"]+)">|<tr><th>(.*?)</tr>|<details[^>]*><summary>(.*?)</summary>`)
	strip := regexp.MustCompile(`<[^>]+>`)
	for _, m := range tag.FindAllStringSubmatch(string(page), -1) {
		switch {
		case m[1] != "":
			if m[1] == "1" { // the title names the run
				fmt.Fprintf(&b, "h1\n")
				continue
			}
			fmt.Fprintf(&b, "h%s %s\n", m[1], strip.ReplaceAllString(m[2], ""))
		case m[3] != "":
			fmt.Fprintf(&b, "  plot %s\n", m[3])
			svg, err := os.ReadFile(filepath.Join(dir, m[3]+".svg"))
			if err != nil {
				t.Errorf("plot %s on the page has no file beside it: %v", m[3], err)
				continue
			}
			for _, text := range svgTexts(svg) {
				fmt.Fprintf(&b, "    %s\n", text)
			}
		case m[4] != "":
			cells := strings.Split(strip.ReplaceAllString(strings.ReplaceAll(m[4], "</th><th>", "|"), ""), "|")
			if len(cells) > 1 { // a header row, not a key-value row
				fmt.Fprintf(&b, "  table %s\n", strings.Join(cells, " | "))
			}
		case m[5] != "":
			fmt.Fprintf(&b, "  details %s\n", strip.ReplaceAllString(m[5], ""))
		}
	}
	return b.String()
}

// svgTexts are a plot's title, axis labels, legend and marks: its texts
// less the tick labels (numbers and sizes).
func svgTexts(svg []byte) []string {
	text := regexp.MustCompile(`<text[^>]*font-size:(\d+)px[^"]*">([^<]*)</text>`)
	tick := regexp.MustCompile(`^[0-9.]+[KMG]?$`)
	var out []string
	for _, m := range text.FindAllStringSubmatch(string(svg), -1) {
		if !tick.MatchString(m[2]) {
			out = append(out, m[1]+"px "+m[2])
		}
	}
	return out
}

// The reports of a quick sweep and of a GPU sweep of record keep their
// structure (testdata/*.structure), are self-contained (no script, nothing
// fetched: every link a plot beside it, an anchor or inline data), write
// exactly the plots the page shows, and leave the run directory as it was.
func TestReportStructureGolden(t *testing.T) {
	root := testutil.ModuleRoot(t)
	for _, c := range reportRuns {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(root, c.dir)
			before := digestDir(t, dir)
			out := t.TempDir()
			path, err := Write(context.Background(), out, dir)
			if err != nil {
				t.Fatal(err)
			}
			if after := digestDir(t, dir); after != before {
				t.Errorf("the report changed the run directory %s", dir)
			}
			golden(t, c.name+".structure", []byte(structure(t, out)))
			page, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			checkSelfContained(t, out, string(page))
		})
	}
}

// checkSelfContained fails a page with a script or anything to fetch.
func checkSelfContained(t *testing.T, dir, page string) {
	t.Helper()
	if strings.Contains(strings.ToLower(page), "<script") {
		t.Error("the page has a script")
	}
	ref := regexp.MustCompile(`(?:src|href)="([^"]*)"|url\(([^)]*)\)`)
	for _, m := range ref.FindAllStringSubmatch(page, -1) {
		u := m[1] + m[2]
		switch {
		case strings.HasPrefix(u, "#"), strings.HasPrefix(u, "data:"):
		case strings.HasSuffix(u, ".svg") && !strings.Contains(u, "/"):
			if _, err := os.Stat(filepath.Join(dir, u)); err != nil {
				t.Errorf("the page links %s, which is not beside it", u)
			}
		default:
			t.Errorf("the page refers to %q", u)
		}
	}
	figures := regexp.MustCompile(`data-plot="([^"]+)"`).FindAllStringSubmatch(page, -1)
	files, _ := filepath.Glob(filepath.Join(dir, "*.svg"))
	if len(figures) != len(files) || len(files) == 0 {
		t.Errorf("%d plots on the page, %d SVG files beside it", len(figures), len(files))
	}
}

// digestDir hashes every file under dir, names and contents.
func digestDir(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// A comparison draws each (pattern, unit) as overlaid curves and a ratio
// plot, with its table, self-contained.
func TestCompareReport(t *testing.T) {
	side := func(name string, scale float64) compare.Side {
		var points []bench.Point
		for i, n := range []int{8, 1024, 65536} {
			s := []float64{scale * float64(100*(i+1)), scale * float64(102*(i+1)), scale * float64(98*(i+1))}
			points = append(points, bench.Summarize(n, "MB/s", s, nil))
		}
		return compare.Side{Name: name, Results: []bench.Result{{Spec: bench.Spec{Pattern: bench.Bandwidth}, Points: points}}}
	}
	tables, err := compare.Build([]compare.Side{side("base", 1), side("tuned", 1.2)})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	path, err := WriteCompare(out, tables)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "compare.structure", []byte(structure(t, out)))
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, out, string(page))
	if _, err := WriteCompare(out, nil); err == nil {
		t.Error("an empty comparison was drawn")
	}
}

// The machine section lists the GPUs with their connection matrix, the
// NICs and the RDMA devices a run recorded (testdata/machine.html).
func TestMachineSection(t *testing.T) {
	src := filepath.Join("testdata", "tiny-sweep")
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var meta map[string]any
	metaPath := filepath.Join(dir, "meta.json")
	b, err := os.ReadFile(metaPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	prov := meta["provenance"].(map[string]any)
	machine := hostinfo.Provenance{
		GPUs: &hostinfo.GPUs{
			Driver: "580.95.05", CUDA: "13.0",
			Devices: []hostinfo.GPU{
				{Index: 0, Name: "NVIDIA H200", BusID: "0000:19:00.0", NUMANode: 0, NVLinks: 18},
				{Index: 1, Name: "NVIDIA H200", BusID: "0000:3b:00.0", NUMANode: 0, NVLinks: 18},
				{Index: 2, Name: "NVIDIA L4", BusID: "0000:ca:00.0", NUMANode: -1},
			},
			Links: []hostinfo.GPULink{
				{GPUs: [2]int{0, 1}, Path: "NV18", P2P: "OK"},
				{GPUs: [2]int{0, 2}, Path: "SYS", P2P: "NS"},
				{GPUs: [2]int{1, 2}, Path: "SYS", P2P: "NS"},
			},
		},
		NICs: []hostinfo.NIC{{Name: "ens1f0", Driver: "mlx5_core", SpeedMbps: 100000, MTU: 9000, State: "up"}, {Name: "eth0", MTU: 1500, State: "down"}},
		RDMA: []hostinfo.RDMADevice{{Name: "mlx5_0", Firmware: "28.39.1002", Ports: []hostinfo.RDMAPort{{Port: 1, State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)", LinkLayer: "InfiniBand"}}},
			{Name: "rxe0", Parent: "eth0", Ports: []hostinfo.RDMAPort{{Port: 1, State: "ACTIVE", LinkLayer: "Ethernet"}}}},
	}
	extra, err := json.Marshal(machine)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(extra, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"gpus", "nics", "rdma"} {
		prov[k] = fields[k]
	}
	if b, err = json.Marshal(meta); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(metaPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	path, err := Write(context.Background(), out, dir)
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile(`(?s)Machine</h3>\n(.*?)\n</table>`).FindSubmatch(page)
	if section == nil {
		t.Fatal("no machine table on the page")
	}
	golden(t, "machine.html", section[1])
}
