package importer

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/cuda"
)

func TestOSUGolden(t *testing.T) {
	goldens(t, "osu", osuTool)
}

// Each fixture is claimed by its own tool's detector only, other tools'
// fixtures (testdata/*/) by neither of these two.
func TestDetect(t *testing.T) {
	paths, _ := filepath.Glob("testdata/*/*.txt")
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := splitLines(data)
		if err != nil {
			t.Fatal(err)
		}
		head := lines[:min(len(lines), headLines)]
		dir := filepath.Base(filepath.Dir(path))
		if got, want := detectOSU(head), dir == "osu"; got != want {
			t.Errorf("%s: detectOSU = %v, want %v", path, got, want)
		}
		if got, want := detectIMB(head), dir == "imb"; got != want {
			t.Errorf("%s: detectIMB = %v, want %v", path, got, want)
		}
	}
}

// osu_mbw_mr prints both MB/s and Messages/s: messages/s x size / 10^6
// gives its MB/s, which shows that OMB's MB/s is 10^6 bytes/s and that the
// values are taken as printed (row "65536  24519.72  374141.29").
func TestOSUUnits(t *testing.T) {
	results := checkGolden(t, "testdata/osu/osu_mbw_mr_7.4.txt", osuTool)
	if len(results) != 2 || results[0].Spec.Pattern != bench.Bandwidth || results[1].Spec.Pattern != bench.MsgRate {
		t.Fatalf("osu_mbw_mr: want a bw and a msgrate result, got %d", len(results))
	}
	bw, rate := results[0].Points[len(results[0].Points)-1], results[1].Points[len(results[1].Points)-1]
	if bw.Size != 65536 || bw.Unit != "MB/s" || bw.Median != 24519.72 || rate.Unit != "msg/s" || rate.Median != 374141.29 {
		t.Fatalf("last row: bw %+v, rate %+v", bw, rate)
	}
	if mbps := rate.Median * 65536 / 1e6; math.Abs(mbps-bw.Median) > 0.01 {
		t.Errorf("msg/s x size = %.2f MB/s of 10^6 bytes, OMB printed %.2f", mbps, bw.Median)
	}
	if results[0].Spec.Window != 64 || results[0].Label != "osu_mbw_mr 7.4" || results[0].Provenance.Libraries["osu"] != "7.4" {
		t.Errorf("spec %+v, label %q, provenance %+v", results[0].Spec, results[0].Label, results[0].Provenance)
	}
}

// -z: latency percentiles map as printed; of bandwidth only P50 (OMB's
// P90/P99 are the fast end, gotune's the slow end).
func TestOSUPercentiles(t *testing.T) {
	lat := checkGolden(t, "testdata/osu/osu_latency_z_7.4.txt", osuTool)[0].Points[0]
	if lat.Median != 0.26 || lat.P50 != 0.24 || lat.P90 != 0.34 || lat.P99 != 0.41 {
		t.Errorf("latency row 1: %+v", lat)
	}
	bw := checkGolden(t, "testdata/osu/osu_bw_z_7.4.txt", osuTool)[0].Points[0]
	if bw.Median != 13.13 || bw.P50 != 13.31 || bw.P90 != 0 || bw.P99 != 0 {
		t.Errorf("bandwidth row 1: %+v", bw)
	}
	data := "# OSU MPI Bandwidth Test v7.4\n# Size      Bandwidth (MB/s)  P1 Tail BW(MB/s) P10 Tail BW(MB/s)\n8   100.0   80.0   90.0\n"
	_, rs, err := Parse("z.txt", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if p := rs[0].Points[0]; p.P99 != 80 || p.P90 != 90 {
		t.Errorf("OMB's P1, P10 of bandwidth should be gotune's p99, p90: %+v", p)
	}
}

// A failed validation is imported, flagged: Validated false and a warning.
func TestOSUValidationFail(t *testing.T) {
	res := checkGolden(t, "testdata/osu/osu_bw_c_fail_7.4.txt", osuTool)[0]
	if !res.Spec.Validate {
		t.Error("Spec.Validate false for a -c run")
	}
	for _, p := range res.Points {
		failed := p.Size == 4096
		if p.Validated == failed || (len(p.Warnings) > 0) != failed {
			t.Errorf("size %d: validated %v, warnings %q", p.Size, p.Validated, p.Warnings)
		}
	}
}

func TestOSUMemory(t *testing.T) {
	for _, c := range []struct {
		path, label string
		mem         []cuda.MemKind
	}{
		{"testdata/osu/osu_latency_cuda_7.0.txt", "osu_latency 7.0 mem device,device", []cuda.MemKind{cuda.MemDevice, cuda.MemDevice}},
		{"testdata/osu/osu_bw_managed_7.0.txt", "osu_bw 7.0 mem managed-device,host", []cuda.MemKind{cuda.MemManagedDevice, cuda.MemHost}},
		{"testdata/osu/osu_bw_cuda_7.4.txt", "osu_bw 7.4 cuda", nil},
		{"testdata/osu/osu_bw_7.4.txt", "osu_bw 7.4", nil},
	} {
		r := checkGolden(t, c.path, osuTool)[0]
		if r.Label != c.label || !slices.Equal(r.Spec.Mem, c.mem) {
			t.Errorf("%s: label %q mem %v, want %q %v", c.path, r.Label, r.Spec.Mem, c.label, c.mem)
		}
	}
}

func TestOSUErrors(t *testing.T) {
	_, err := parseFixture(t, "testdata/osu/osu_bw_truncated_7.4.txt")
	checkLineError(t, err, "osu_bw_truncated_7.4.txt", 13, "1 fields, want 2")

	const title = "# OSU MPI Bandwidth Test v7.4\n# Size      Bandwidth (MB/s)        Validation\n"
	checkLineErrors(t, []lineErrorCase{
		{"value.txt", title + "1   12.5   Pass\n2   x12   Pass\n", 4, []string{"not a number"}},
		{"negative.txt", title + "1   -12.5   Pass\n", 3, []string{"0 or more"}},
		{"nan.txt", title + "1   NaN   Pass\n", 3, []string{"finite"}},
		{"validation.txt", title + "1   12.5   Maybe\n", 3, []string{"want Pass or Fail"}},
		{"repeat.txt", title + "1   12.5   Pass\n1   12.6   Pass\n", 4, []string{"size 1 repeated"}},
		{"size.txt", title + "1.5   12.5   Pass\n", 3, []string{"whole number of bytes"}},
		{"noheader.txt", "# OSU MPI Latency Test v7.4\n1   0.25\n", 2, []string{"before the column header"}},
		{"norows.txt", title, 2, []string{"no rows", "truncated"}},
		{"notitle.txt", "# OSU MPI Latency Test v7.4\n# Datatype: MPI_CHAR.\n", 1, []string{"no column header"}},
		{"nbc.txt", "# OSU MPI Non-blocking Allreduce Latency Test v7.4\n", 1, []string{"not supported"}},
		{"columns.txt", "# OSU MPI Latency Test v7.4\n# Size   Overall(us)   Compute(us)\n", 2, []string{"unsupported columns"}},
		{"second.txt", "# OSU MPI Barrier Latency Test v7.4\n# Avg Latency(us)\n 0.3\n 0.4\n", 4, []string{"second row"}},
	})
}

// Blocks written one after another give a Result each.
func TestOSUConcatenated(t *testing.T) {
	a, _ := os.ReadFile("testdata/osu/osu_latency_7.4.txt")
	b, _ := os.ReadFile("testdata/osu/osu_bw_7.4.txt")
	_, rs, err := Parse("both.txt", append(a, b...))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Spec.Pattern != bench.Latency || rs[1].Spec.Pattern != bench.Bandwidth {
		t.Fatalf("got %d results", len(rs))
	}
}

func FuzzOSU(f *testing.F) {
	fuzzParser(f, "osu", parseOSU, true, func(t *testing.T, results []bench.Result) {
		for _, r := range results {
			if !strings.HasPrefix(r.Label, "osu_") {
				t.Fatalf("label %q", r.Label)
			}
		}
	})
}
