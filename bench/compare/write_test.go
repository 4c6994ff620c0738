package compare_test

import (
	"bytes"
	"encoding/csv"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"

	"github.com/gotune/gotune/bench/compare"
	"github.com/gotune/gotune/internal/testutil"
)

func acceptanceTables(t *testing.T) []compare.Table {
	t.Helper()
	tables, err := compare.Build(acceptanceSides(t))
	if err != nil {
		t.Fatal(err)
	}
	return tables
}

func render(t *testing.T, format string, tables []compare.Table) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := compare.Write(&buf, format, tables); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The acceptance comparison in every format (go test -update rewrites).
func TestGolden(t *testing.T) {
	tables := acceptanceTables(t)
	for _, format := range compare.Formats {
		t.Run(format, func(t *testing.T) {
			testutil.Golden(t, filepath.Join("testdata", "acceptance."+format), render(t, format, tables), *update)
		})
	}
}

func TestUnknownFormat(t *testing.T) {
	var buf bytes.Buffer
	err := compare.Write(&buf, "html", acceptanceTables(t))
	if err == nil || !strings.Contains(err.Error(), `"html"`) || !strings.Contains(err.Error(), strings.Join(compare.Formats, ", ")) {
		t.Errorf("error %v, want one naming html and the formats", err)
	}
	if buf.Len() != 0 {
		t.Errorf("wrote %q before failing", buf.String())
	}
}

// Every CSV record has the header's columns; a row per size and side.
func TestCSVShape(t *testing.T) {
	tables := acceptanceTables(t)
	recs, err := csv.NewReader(bytes.NewReader(render(t, "csv", tables))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := 1 // the header
	for _, tab := range tables {
		want += len(tab.Rows) * len(tab.Sides)
	}
	if len(recs) != want {
		t.Errorf("%d records, want %d", len(recs), want)
	}
}

// benchfmt reads every sample back, under the side's name key, with the
// value in ns/op for times and in the unit itself for rates.
func TestBenchReadable(t *testing.T) {
	tables := acceptanceTables(t)
	samples, lines := 0, map[string]int{}
	for _, tab := range tables {
		for _, r := range tab.Rows {
			for _, c := range r.Cells {
				samples += len(c.Samples)
			}
		}
	}
	rd := benchfmt.NewReader(bytes.NewReader(render(t, "bench", tables)), "compare.bench")
	higher := map[string]bool{}
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			t.Fatal(rec)
		case *benchfmt.UnitMetadata:
			higher[rec.OrigUnit] = rec.Key == "better" && rec.Value == "higher"
		case *benchfmt.Result:
			_, parts := rec.Name.Parts()
			if len(parts) != 3 || !strings.HasPrefix(string(parts[1]), "/side=") || rec.Iters != 1 || len(rec.Values) != 1 {
				t.Fatalf("line %s", rec.Name)
			}
			lines[string(parts[1])]++
			v := rec.Values[0]
			if string(parts[0]) == "/pattern=latency" && string(parts[1]) == "/side=mpich" && string(parts[2]) == "/size=1" &&
				(v.OrigUnit != "ns/op" || v.OrigValue != 5694620) {
				t.Errorf("mpich latency at 1: %v %s, want 5694620 ns/op", v.OrigValue, v.OrigUnit)
			}
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range lines {
		total += n
	}
	// Reference: latency 11×2 + 2×1, bw 17×2; MPICH 11; gotune 6×5.
	if total != samples || total != 24+34+11+30 || lines["/side=gotune"] != 30 {
		t.Errorf("%d sample lines (%v), want %d", total, lines, samples)
	}
	if !higher["MB/s"] {
		t.Errorf("no Unit MB/s better=higher line")
	}
}

// A side name that would break a benchmark name is made safe.
func TestBenchSideName(t *testing.T) {
	tables := acceptanceTables(t)
	tables[0].Sides[1].Name = "MPICH 4.0/vm"
	out := string(render(t, "bench", tables[:1]))
	if !strings.Contains(out, "/side=MPICH_4.0_vm/size=1 1 5694620 ns/op\n") {
		t.Errorf("no sanitized side name in:\n%s", out)
	}
}
