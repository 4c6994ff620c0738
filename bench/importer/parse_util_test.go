package importer

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/testutil"
)

// The -update flag rewrites golden files.
var _ = flag.Bool("update", false, "rewrite the golden files under testdata")

// goldens runs every fixture of testdata/<dir> that parses through
// checkGolden, and asserts that no other tool's detector claims it.
func goldens(t *testing.T, dir, tool string) {
	good, _ := fixtures(t, dir)
	for _, path := range good {
		t.Run(filepath.Base(path), func(t *testing.T) {
			checkGolden(t, path, tool)
			data, _ := os.ReadFile(path)
			lines, _ := splitLines(data)
			for _, p := range parsers {
				if p.Tool != tool && p.Detect(lines[:min(len(lines), headLines)]) {
					t.Errorf("%s's detector claims this %s output too", p.Tool, tool)
				}
			}
		})
	}
}

// parseFixture parses the fixture at path, named by its base name.
func parseFixture(t *testing.T, path string) ([]bench.Result, error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, results, err := Parse(filepath.Base(path), data)
	return results, err
}

// parsed is what a fixture that parses gives.
func parsed(t *testing.T, path string) []bench.Result {
	t.Helper()
	results, err := parseFixture(t, path)
	if err != nil {
		t.Fatal(err)
	}
	return results
}

// wantParseError parses text as file, wants it detected as tool and
// refused with a *LineError at line saying want.
func wantParseError(t *testing.T, tool, file, text string, line int, want string) {
	t.Helper()
	got, _, err := Parse(file, []byte(text))
	if got != tool {
		t.Fatalf("detected as %q", got)
	}
	checkLineError(t, err, file, line, want)
}

// parseErrorCase is a text that Parse refuses at line, saying want.
type parseErrorCase struct {
	name, text string
	line       int
	want       string
}

// wantParseErrors runs each case as a subtest of wantParseError.
func wantParseErrors(t *testing.T, tool, file string, cases []parseErrorCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantParseError(t, tool, file, c.text, c.line, c.want) })
	}
}

// lineErrorCase is a text, named name, that Parse refuses at line, with
// an error saying each of words.
type lineErrorCase struct {
	name, data string
	line       int
	words      []string
}

// checkLineErrors checks each case's error with checkLineError.
func checkLineErrors(t *testing.T, cases []lineErrorCase) {
	t.Helper()
	for _, c := range cases {
		_, _, err := Parse(c.name, []byte(c.data))
		checkLineError(t, err, c.name, c.line, c.words...)
	}
}

// fuzzParser seeds f with the fixtures of dir: on any input parse (and
// Parse) keep checkFuzzed's contract (points: the OSU and IMB parsers'
// shape of points), and more, when given, checks parse's results further.
func fuzzParser(f *testing.F, dir string, parse func(string, []string) ([]bench.Result, error), points bool, more func(*testing.T, []bench.Result)) {
	seedFixtures(f, dir)
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := splitLines(data)
		if err != nil {
			return
		}
		results, err := parse("fuzz.txt", lines)
		checkFuzzed(t, "fuzz.txt", results, err, points)
		if more != nil {
			more(t, results)
		}
		_, results, err = Parse("fuzz.txt", data)
		checkFuzzed(t, "fuzz.txt", results, err, false)
	})
}

// seedFixtures adds the text fixtures of each of dirs to f's corpus.
func seedFixtures(f *testing.F, dirs ...string) {
	for _, dir := range dirs {
		paths, _ := filepath.Glob(filepath.Join("testdata", dir, "*.txt"))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
}

// checkGolden parses the fixture at path with Parse, wants tool, and
// compares the Results as indented JSON with path's NAME.golden.json
// (rewritten under -update).
func checkGolden(t *testing.T, path, tool string) []bench.Result {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, results, err := Parse(filepath.Base(path), data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if got != tool {
		t.Fatalf("%s: detected as %q, want %q", path, got, tool)
	}
	matchGolden(t, strings.TrimSuffix(path, ".txt")+".golden.json", results)
	return results
}

// matchGolden compares results, as indented JSON, with the golden file
// (rewritten under -update).
func matchGolden(t *testing.T, golden string, results []bench.Result) {
	t.Helper()
	out, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, golden, append(out, '\n'), testutil.Updating())
}

// fixtures lists the text fixtures of dir that parse ("broken" and
// "truncated" ones are error cases).
func fixtures(t *testing.T, dir string) (good, bad []string) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures under testdata/%s (%v)", dir, err)
	}
	for _, p := range paths {
		if strings.Contains(p, "truncated") || strings.Contains(p, "broken") {
			bad = append(bad, p)
		} else {
			good = append(good, p)
		}
	}
	return good, bad
}

// checkLineError checks that err is a *LineError of file at line (-1: any
// line) whose text contains each of words.
func checkLineError(t *testing.T, err error, file string, line int, words ...string) {
	t.Helper()
	var le *LineError
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T): want a *LineError", err, err)
	}
	if le.File != file || (line >= 0 && le.Line != line) {
		t.Errorf("error %q: at %s:%d, want %s:%d", err, le.File, le.Line, file, line)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q: want it to say %q", err, w)
		}
	}
}

// checkFuzzed is the contract every parser keeps on any input: no panic;
// an error is a *LineError naming the file. With points, each point of the
// results must be one finite, non-negative sample (the OSU and IMB
// parsers' shape).
func checkFuzzed(t *testing.T, name string, results []bench.Result, err error, points bool) {
	t.Helper()
	if err != nil {
		var le *LineError
		if !errors.As(err, &le) || le.File != name || !strings.HasPrefix(err.Error(), name+":") {
			t.Fatalf("error %q (%T): want a *LineError naming %s", err, err, name)
		}
		return
	}
	if !points {
		return
	}
	for _, r := range results {
		if len(r.Points) == 0 {
			t.Fatalf("result %q without points", r.Label)
		}
		for _, p := range r.Points {
			if len(p.Samples) != 1 || p.Median != p.Samples[0] || p.Median < 0 || p.Unit == "" {
				t.Fatalf("result %q: bad point %+v", r.Label, p)
			}
		}
	}
}

func TestParseUtil(t *testing.T) {
	for _, s := range []string{"-1", "1.5", "", "x", "99999999999999999999999"} {
		if _, err := parseBytes(s); err == nil {
			t.Errorf("parseBytes(%q): want an error", s)
		}
	}
	for _, s := range []string{"NaN", "inf", "-0.5", "1e999", "", "1,5"} {
		if _, err := parseMeasure(s); err == nil {
			t.Errorf("parseMeasure(%q): want an error", s)
		}
	}
	if v, err := parseMeasure("24519.72"); err != nil || v != 24519.72 {
		t.Errorf("parseMeasure(24519.72) = %v, %v", v, err)
	}
}

// Random bytes fail clearly, naming the file, whichever parser claims them.
func FuzzParse(f *testing.F) {
	seedFixtures(f, "osu", "imb")
	f.Add([]byte("\x00\x01binary"))
	f.Add([]byte("# OSU MPI Latency Test v7.4\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, results, err := Parse("fuzz.txt", data)
		checkFuzzed(t, "fuzz.txt", results, err, false)
		if err == nil && len(results) == 0 {
			t.Fatal("no error and no results")
		}
	})
}
