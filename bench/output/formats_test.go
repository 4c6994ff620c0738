package output

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/hostinfo"
)

// benchLine is what one line of the bench format should read back as.
type benchLine struct {
	name   string
	iters  int
	config map[string]string
	values map[string]float64 // by unit as written
}

func wantBench(results []bench.Result) []benchLine {
	var want []benchLine
	for _, r := range results {
		config := map[string]string{
			"goos": "linux", "goarch": "amd64", "pkg": "github.com/gotune/gotune",
			"cpu": r.Provenance.CPUModel, "label": r.Label, "host": r.Provenance.Host,
			"kernel": r.Provenance.Kernel, "gotune": r.Provenance.Gotune,
		}
		for _, p := range r.Points {
			for _, s := range p.Samples {
				var base string
				var values map[string]float64
				switch r.Spec.Pattern {
				case bench.Latency:
					base, values = "Latency", map[string]float64{"ns/op": s * 1000}
				case bench.Bandwidth:
					base, values = "BW", map[string]float64{"ns/op": float64(p.Size) / (s * 1e6) * 1e9, "MB/s": s}
				case bench.MsgRate:
					base, values = "MsgRate", map[string]float64{"ns/op": 1e9 / s, "msg/s": s}
				}
				gpu := "" // the fixture's one GPU run: its kinds, GPUs and load name it apart
				if r.Spec.GPULoad > 0 {
					gpu = "/mem=device,pinned/gpus=0,1/kernel=full"
				}
				want = append(want, benchLine{
					name:   fmt.Sprintf("%s/transport=%s%s/size=%d", base, r.Spec.Transport, gpu, p.Size),
					iters:  p.Iters,
					config: config,
					values: values,
				})
			}
		}
	}
	return want
}

func TestBenchRoundTrip(t *testing.T) {
	pinPlatform(t)
	r := benchfmt.NewReader(bytes.NewReader(render(t, "bench")), "bench")
	var got []benchLine
	msgRateHigher := false
	for r.Scan() {
		switch rec := r.Result().(type) {
		case *benchfmt.SyntaxError:
			t.Fatal(rec)
		case *benchfmt.UnitMetadata:
			msgRateHigher = rec.OrigUnit == "msg/s" && rec.Key == "better" && rec.Value == "higher"
		case *benchfmt.Result:
			line := benchLine{name: rec.Name.String(), iters: rec.Iters, config: map[string]string{}, values: map[string]float64{}}
			for _, c := range rec.Config {
				line.config[c.Key] = string(c.Value)
			}
			for _, v := range rec.Values {
				if v.OrigUnit != "" { // the reader converts ns/op to sec/op, MB/s to B/s
					line.values[v.OrigUnit] = v.OrigValue
				} else {
					line.values[v.Unit] = v.Value
				}
			}
			got = append(got, line)
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if !msgRateHigher {
		t.Error("no unit metadata saying more msg/s is better")
	}
	want := wantBench(fixture())
	if len(got) != len(want) {
		t.Fatalf("read %d benchmark lines, want %d", len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		if g.name != w.name || g.iters != w.iters {
			t.Errorf("line %d: %s %d, want %s %d", i, g.name, g.iters, w.name, w.iters)
		}
		for k, v := range w.config {
			if g.config[k] != v {
				t.Errorf("line %d (%s): config %s = %q, want %q", i, g.name, k, g.config[k], v)
			}
		}
		if len(g.config) != len(w.config)-emptyValues(w.config) {
			t.Errorf("line %d (%s): config %v, want %v", i, g.name, g.config, w.config)
		}
		if len(g.values) != len(w.values) {
			t.Errorf("line %d (%s): values %v, want %v", i, g.name, g.values, w.values)
		}
		for unit, v := range w.values {
			if gv, ok := g.values[unit]; !ok || math.Abs(gv-v) > 1e-9*math.Abs(v) {
				t.Errorf("line %d (%s): %v %s, want %v", i, g.name, gv, unit, v)
			}
		}
	}
}

func emptyValues(m map[string]string) int {
	n := 0
	for _, v := range m {
		if v == "" {
			n++
		}
	}
	return n
}

func TestJSONLines(t *testing.T) {
	results := fixture()
	lines := strings.Split(strings.TrimSuffix(string(render(t, "json")), "\n"), "\n")
	var run bench.Result // the result whose points follow
	var n int
	for i, line := range lines {
		var kind struct{ Type string }
		if err := json.Unmarshal([]byte(line), &kind); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, line)
		}
		switch kind.Type {
		case "run":
			var got struct {
				Label      string
				Provenance hostinfo.Provenance
				Spec       bench.Spec
			}
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			if len(results) == 0 {
				t.Fatalf("line %d: more runs than results", i+1)
			}
			run, results = results[0], results[1:]
			n = 0
			if got.Label != run.Label || !reflect.DeepEqual(got.Spec, run.Spec) || !reflect.DeepEqual(got.Provenance, run.Provenance) {
				t.Errorf("line %d: run %+v, want label %q, %+v, %+v", i+1, got, run.Label, run.Spec, run.Provenance)
			}
		case "point":
			var got struct {
				Label, Transport string
				Pattern          bench.Pattern
				bench.Point
			}
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			if n >= len(run.Points) {
				t.Fatalf("line %d: more points than result %q has", i+1, run.Label)
			}
			if got.Label != run.Label || got.Transport != run.Spec.Transport || got.Pattern != run.Spec.Pattern ||
				!reflect.DeepEqual(got.Point, run.Points[n]) {
				t.Errorf("line %d: point %+v, want %+v of %q", i+1, got, run.Points[n], run.Label)
			}
			n++
		default:
			t.Errorf("line %d: type %q", i+1, kind.Type)
		}
	}
	if len(results) > 0 {
		t.Errorf("%d results missing", len(results))
	}
}

// ReadJSON reads back what the json format wrote, field for field, also
// when two writes were appended to one file (gotune import --out).
func TestReadJSONRoundTrip(t *testing.T) {
	data := render(t, "json")
	twice := append(append(slices.Clone(data), '\n'), data...) // a blank line between appends is skipped
	got, err := ReadJSON("runs.jsonl", bytes.NewReader(twice))
	if err != nil {
		t.Fatal(err)
	}
	want := append(fixture(), fixture()...)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, want)
	}
}

func TestReadJSONErrors(t *testing.T) {
	run := `{"type":"run","label":"a","spec":{"transport":"sm","pattern":"latency"}}`
	point := `{"type":"point","label":"a","size":8,"unit":"us","samples":[1]}`
	cases := []struct {
		name, input, want string
	}{
		{"empty", "\n\n", "f.jsonl: no results"},
		{"not json", run + "\nsize 8 1.0\n", "f.jsonl:2: not a gotune JSON line"},
		{"point first", point + "\n", "f.jsonl:1: a point before any run line"},
		{"other label", run + "\n" + strings.Replace(point, `"a"`, `"b"`, 1) + "\n", `f.jsonl:2: point of "b" inside run "a"`},
		{"bad type", run + "\n\n" + `{"type":"summary"}` + "\n", `f.jsonl:3: line type "summary"`},
		{"bad field", run + "\n" + `{"type":"point","label":"a","size":"eight"}`, "f.jsonl:2: point: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadJSON("f.jsonl", strings.NewReader(c.input))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestCSV(t *testing.T) {
	results := fixture()
	rows, err := csv.NewReader(bytes.NewReader(render(t, "csv"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rows[0], csvHeader) {
		t.Errorf("header %q, want %q", rows[0], csvHeader)
	}
	rows = rows[1:]
	for _, r := range results {
		for _, p := range r.Points {
			if len(rows) == 0 {
				t.Fatalf("no row for %q size %d", r.Label, p.Size)
			}
			row := rows[0]
			rows = rows[1:]
			if len(row) != len(csvHeader) {
				t.Fatalf("row %q has %d columns, want %d", row, len(row), len(csvHeader))
			}
			median, err := strconv.ParseFloat(row[5], 64)
			if row[0] != r.Label || row[3] != strconv.Itoa(p.Size) || err != nil || median != p.Median {
				t.Errorf("row %q, want %q size %d median %v", row, r.Label, p.Size, p.Median)
			}
		}
	}
	if len(rows) > 0 {
		t.Errorf("%d extra rows", len(rows))
	}
}

// TestOSULayout checks the columns OSU's scripts split on: a size in 10
// characters, then values in 18 with 2 decimals.
func TestOSULayout(t *testing.T) {
	sc := bufio.NewScanner(bytes.NewReader(render(t, "osu")))
	rows := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "# ") {
			continue
		}
		rows++
		fields := strings.Fields(line)
		if _, err := strconv.Atoi(fields[0]); err != nil || !strings.HasPrefix(line, fields[0]) {
			t.Errorf("%q: no size first", line)
		}
		if want := 10 + 18*(len(fields)-1); len(line) != want {
			t.Errorf("%q: %d characters, want %d", line, len(line), want)
		}
		for _, f := range fields[1:] {
			if i := strings.IndexByte(f, '.'); i < 0 || len(f)-i-1 != 2 {
				t.Errorf("%q: value %s not with 2 decimals", line, f)
			}
		}
	}
	if rows != 9 {
		t.Errorf("%d rows, want 9", rows)
	}
}
