package output

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
)

func TestWriteFloor(t *testing.T) {
	lat := bench.Result{Spec: bench.Spec{Pattern: bench.Latency}, Points: []bench.Point{{Size: 8, Median: 0.25}, {Size: 1024, Median: 0.5}}}
	f := bench.Floor{CPUs: []int{1, 2}, Trips: 100, Runs: []float64{120, 100, 130, 90}, Median: 95, Fenced: true,
		TwoRuns: []float64{170, 180}, TwoLines: 175}
	cases := []struct {
		format string
		r      bench.Result
		want   string // the whole output, or the error's start
	}{
		{"table", lat, "\nfloor: one cache line between CPUs 1 and 2, 95.0 ns one way (median of 2 runs of 100 round trips, polling fenced)\n" +
			"       two lines, one per direction as one-way channels move it: 175.0 ns one way (1.84x)\n" +
			"Size     Latency (us)  x floor\n" +
			"8                0.25     2.63\n" +
			"1K               0.50     5.26\n"},
		{"osu", lat, "\n# floor: one cache line between CPUs 1 and 2, 95.0 ns one way (median of 2 runs of 100 round trips, polling fenced)\n" +
			"#        two lines, one per direction as one-way channels move it: 175.0 ns one way (1.84x)\n" +
			"# Size     Latency (us)  x floor\n" +
			"# 8                0.25     2.63\n" +
			"# 1K               0.50     5.26\n"},
		{"bench", lat, "BenchmarkFloor/cpus=1,2 100 100 ns/op\nBenchmarkFloor/cpus=1,2 100 90 ns/op\n" +
			"BenchmarkFloor/lines=2/cpus=1,2 100 170 ns/op\nBenchmarkFloor/lines=2/cpus=1,2 100 180 ns/op\n"},
		{"csv", lat, `error: floor: format "csv"`},
		{"table", bench.Result{Spec: bench.Spec{Pattern: bench.Bandwidth}}, "error: floor: beside a bw result"},
	}
	for _, c := range cases {
		var b bytes.Buffer
		got := ""
		if err := WriteFloor(&b, c.format, c.r, f); err != nil {
			got = "error: " + err.Error()
		} else {
			got = b.String()
		}
		if !strings.HasPrefix(got, c.want) || !strings.HasPrefix(c.want, "error") && got != c.want {
			t.Errorf("%s %s:\n%s\nwant\n%s", c.format, c.r.Spec.Pattern, got, c.want)
		}
	}
}
