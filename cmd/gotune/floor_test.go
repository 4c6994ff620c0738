package main

import (
	"regexp"
	"strings"
	"testing"
)

// --floor adds, after OSU's rows, "#" lines: the floor and the two-line
// figure, then each size's latency and its multiple of the floor.
func TestFloorBesideLatency(t *testing.T) {
	out, e, code := run(t, "bench", "-s", "8,64", "--reps", "2", "--iters", "20", "--warmup", "2", "-f", "osu", "--floor", "--cpus", "0,1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 10 || lines[4] != "" {
		t.Fatalf("output\n%s", out)
	}
	if !regexp.MustCompile(`^# floor: one cache line between CPUs 0 and 1, \d+\.\d ns one way \(median of 25 runs of 20000 round trips, polling (flat out|fenced)\)$`).MatchString(lines[5]) {
		t.Errorf("floor line %q", lines[5])
	}
	if !regexp.MustCompile(`^# +two lines, one per direction as one-way channels move it: \d+\.\d ns one way \(\d+\.\d\dx\)$`).MatchString(lines[6]) {
		t.Errorf("two-line line %q", lines[6])
	}
	row := regexp.MustCompile(`^# (8|64) +\d+\.\d\d +\d+\.\d\d$`)
	for _, l := range lines[8:] {
		if !row.MatchString(l) {
			t.Errorf("floor row %q", l)
		}
	}
}
