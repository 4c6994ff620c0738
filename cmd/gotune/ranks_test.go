package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --ranks runs each multi-rank pattern over 4 rank processes, validated,
// in OSU's shape, and gotune import reads the OSU-titled ones back.
func TestBenchRanks(t *testing.T) {
	for _, c := range []struct {
		pattern, title, header, imported string
	}{
		{"mbw_mr", "# OSU MPI Multiple Bandwidth / Message Rate Test", "MB/s        Messages/s", "osu, 2 results"},
		{"multi_lat", "# OSU MPI Multi Latency Test", "Avg Latency(us)", "osu, 1 results"},
		{"alltoall", "# OSU MPI All-to-All Personalized Exchange Latency Test", "Max Latency(us)  Iterations", "osu, 1 results"},
		{"incast", "# gotune Incast Test: gotune sm", "MB/s        Messages/s", ""},
	} {
		t.Run(c.pattern, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), c.pattern+".txt")
			_, stderr, code := run(t, "bench", "-q", "--ranks", "4", "-p", c.pattern, "-s", "8,4K", "--iters", "3", "--warmup", "1",
				"--reps", "2", "--window", "4", "--settle", "0", "--validate", "--format", "osu", "--out", out)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			text := string(b)
			for _, want := range []string{c.title + "\n", "# 4 ranks ", c.header, "\n8  ", "\n4096  "} {
				if !strings.Contains(text, want) {
					t.Errorf("no %q in\n%s", want, text)
				}
			}
			if c.imported == "" {
				return
			}
			if _, stderr, code := run(t, "import", "--format", "csv", out); code != 0 || stderr != out+": "+c.imported+"\n" {
				t.Errorf("import: exit %d, stderr %q, want %q", code, stderr, c.imported)
			}
		})
	}
}

func TestBenchRanksErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ranks", "1"}, `--ranks "1": want a number of ranks, at least 2, or node`},
		{[]string{"--ranks", "many"}, `--ranks "many"`},
		{[]string{"--ranks", "4"}, "--pattern latency measures a pair: --ranks 4 needs mbw_mr"},
		{[]string{"--ranks", "3", "-p", "multi_lat"}, "--ranks 3: multi_lat pairs rank i with rank i+N/2"},
		{[]string{"--ranks", "4", "-p", "incast", "--cpus", "0,1"}, `--cpus "0,1": need a CPU for each of the 4 ranks`},
		{[]string{"--ranks", "4", "-p", "alltoall", "--mem", "pinned"}, "the multi-rank patterns measure host memory"},
	} {
		_, e, code := run(t, append([]string{"bench", "-s", "8"}, c.args...)...)
		if code == 0 || !strings.Contains(e, c.want) {
			t.Errorf("%v: exit %d, stderr %q: want %q", c.args, code, e, c.want)
		}
	}
}
