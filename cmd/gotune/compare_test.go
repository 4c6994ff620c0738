package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// compareFixtures are the acceptance comparison's files (bench/compare's
// tests hold the hand-computed values; here the command must reach them).
var (
	osuLat    = filepath.Join(importFixtures, "osu/osu_latency_7.4.txt")
	osuLat70  = filepath.Join(importFixtures, "osu/osu_latency_7.0.txt")
	osuMPICH  = filepath.Join(importFixtures, "osu/osu_latency_7.4_mpich.txt")
	osuBW     = filepath.Join(importFixtures, "osu/osu_bw_7.4.txt")
	gotuneRun = "../../bench/compare/testdata/gotune_sm.jsonl"
)

func TestCompare(t *testing.T) {
	stdout, stderr, code := run(t, "compare", "--format", "csv",
		"openmpi="+osuLat+","+osuLat70+","+osuBW, "mpich="+osuMPICH, "gotune="+gotuneRun)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := osuLat + ": osu, 1 results\n" + osuLat70 + ": osu, 1 results\n" + osuBW + ": osu, 1 results\n" +
		osuMPICH + ": osu, 1 results\n" + gotuneRun + ": gotune, 2 results\n"
	if stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	recs, err := csv.NewReader(strings.NewReader(stdout)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{} // by pattern/size/side
	for _, r := range recs[1:] {
		rows[r[0]+"/"+r[4]+"/"+r[5]] = r
	}
	// pattern/size/side: n, median, ratio, verdict, p (columns 6, 7, 11, 12, 13).
	checks := []struct{ key, n, median, ratio, verdict, p string }{
		// (0.26+0.28)/2 = 0.27 against 0.20..0.24: 0.27/0.22; 2+5 samples apart: p = 2/21.
		{"latency/1/gotune", "5", "0.22", "1.2272727272727273", "unsettled", "0.09523809523809523"},
		// (0.71+0.73)/2 = 0.72 against MPICH's one 1.21.
		{"latency/1024/mpich", "1", "1.21", "0.5950413223140496", "n/a (one sample)", ""},
		// osu_bw 7.4 alone (no -c run here): 6200/5659.58, 1 reference sample.
		{"bw/4096/gotune", "5", "6200", "1.095487651027108", "n/a (one sample)", ""},
		{"bw/4096/mpich", "0", "", "", "", ""},
	}
	for _, c := range checks {
		r, ok := rows[c.key]
		if !ok {
			t.Errorf("no row %s in:\n%s", c.key, stdout)
			continue
		}
		if got := [5]string{r[6], r[7], r[11], r[12], r[13]}; got != [5]string{c.n, c.median, c.ratio, c.verdict, c.p} {
			t.Errorf("%s: %q, want %q", c.key, got, [5]string{c.n, c.median, c.ratio, c.verdict, c.p})
		}
	}
}

func TestCompareTable(t *testing.T) {
	// The side's name defaults to its first file's base name; --pattern
	// keeps one pattern ("lat" is latency).
	stdout, stderr, code := run(t, "compare", "--pattern", "lat", osuLat+","+osuLat70, gotuneRun)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"latency (us, lower is better); reference: osu_latency_7.4.txt", "gotune_sm.jsonl", "unsettled p=0.095",
		"geomean ratio (> 1: better than osu_latency_7.4.txt): gotune_sm.jsonl 1.051 over 4 sizes"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "bw (MB/s") {
		t.Errorf("--pattern lat printed a bw table:\n%s", stdout)
	}
}

func TestCompareErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	garbage := write("notes.txt", "these are not benchmark results\n")
	badJSON := write("bad.jsonl", `{"type":"run","label":"a","spec":{"pattern":"latency"}}`+"\n"+`{"type":"point","label":"a","size":"x"}`+"\n")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"one side", []string{osuLat}, "requires at least 2 arg(s)"},
		{"unknown tool", []string{osuLat, "x=" + garbage}, garbage + ": not the output of a known tool"},
		{"bad json line", []string{osuLat, badJSON}, badJSON + ":2: point: "},
		{"missing file", []string{osuLat, filepath.Join(dir, "none.txt")}, filepath.Join(dir, "none.txt") + ": no such file"},
		{"format", []string{"--format", "html", osuLat, osuMPICH}, `--format "html": want one of table, markdown, csv, bench`},
		{"pattern", []string{"--pattern", "bw", osuLat, osuBW}, `side "osu_latency_7.4.txt" (` + osuLat + `): no results of pattern "bw"`},
		{"same names", []string{osuLat, osuLat}, `two sides are named "osu_latency_7.4.txt"`},
		{"empty name", []string{"=" + osuLat, osuMPICH}, "empty name before ="},
		{"empty path", []string{"a=" + osuLat + ",", osuMPICH}, "empty path"},
		{"nothing shared", []string{osuLat, osuBW}, "no other side measures a pattern and unit of the reference"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := run(t, append([]string{"compare"}, c.args...)...)
			if code == 0 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want failure containing %q", code, stderr, c.want)
			}
			if stdout != "" {
				t.Errorf("printed %q before failing", stdout)
			}
		})
	}
}

func TestSplitSide(t *testing.T) {
	cases := []struct {
		arg   string
		name  string
		paths []string
	}{
		{"a.txt", "a.txt", []string{"a.txt"}},
		{"dir/a.txt,b.txt", "a.txt", []string{"dir/a.txt", "b.txt"}},
		{"base=a.txt,b.txt", "base", []string{"a.txt", "b.txt"}},
		{"dir/x=1.txt", "x=1.txt", []string{"dir/x=1.txt"}}, // "=" after a separator belongs to the path
	}
	for _, c := range cases {
		name, paths, err := splitSide(c.arg)
		if err != nil || name != c.name || strings.Join(paths, "|") != strings.Join(c.paths, "|") {
			t.Errorf("splitSide(%q) = %q, %q, %v; want %q, %q", c.arg, name, paths, err, c.name, c.paths)
		}
	}
}
