package output

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/importer"
)

// multiFixture is a run of each multi-rank pattern, 4 ranks on 2 CPUs.
func multiFixture() []bench.Result {
	var out []bench.Result
	for _, pat := range bench.MultiPatterns {
		r := bench.Result{Label: "gotune sm", Spec: bench.Spec{Transport: "sm", Pattern: pat, Ranks: 4, Sizes: []int{8, 65536},
			Reps: 3, Window: 64, CPUs: []int{0, 0, 1, 1}}}
		for k, size := range r.Spec.Sizes {
			v := float64(10 * (k + 1))
			p := bench.Point{Size: size, Iters: 100, Warmup: 10, Unit: pat.Unit(), Samples: []float64{v, v, v},
				Median: v, CILow: v, CIHigh: v, Confidence: 0.75, P50: v, P90: v, P99: v, Validated: true}
			switch pat {
			case bench.MultiBandwidth, bench.Incast:
				p.MsgRate = v * 1e6 / float64(size)
			case bench.AllToAll:
				p.RankMin, p.RankMax = v-1, v+1
			}
			r.Points = append(r.Points, p)
		}
		out = append(out, r)
	}
	return out
}

// The table names the placement and the patterns' side values; the Go
// benchmark names carry the ranks.
func TestMultiRankTableAndBench(t *testing.T) {
	for _, c := range []struct {
		format string
		want   []string
	}{
		{"table", []string{"placement: 4 ranks on cpus 0,0,1,1 (rank r on the r-th); pairs 0-2 1-3",
			"placement: 4 ranks on cpus 0,0,1,1 (rank r on the r-th); ranks 1-3 send to rank 0",
			"Messages/s", "1250000", "Fastest rank (us)", "19.00", "21.00"}},
		{"bench", []string{"BenchmarkMultiBW/transport=sm/ranks=4/size=8 100 800 ns/op 10 MB/s",
			"BenchmarkMultiLatency/transport=sm/ranks=4/size=65536 100 20000 ns/op", "BenchmarkAllToAll/", "BenchmarkIncast/"}},
		{"osu", []string{"# OSU MPI Multi Latency Test\n# gotune sm\n# 4 ranks on cpus 0,0,1,1 (rank r on the r-th); pairs 0-2 1-3\n",
			"# [ pairs: 2 ] [ window size: 64 ]", "# gotune Incast Test: gotune sm", "# [ senders: 3 ] [ window size: 64 ]",
			"65536                  20.00             19.00             21.00         100\n"}},
	} {
		t.Run(c.format, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, c.format, multiFixture()); err != nil {
				t.Fatal(err)
			}
			for _, want := range c.want {
				if !strings.Contains(buf.String(), want) {
					t.Errorf("no %q in\n%s", want, buf.String())
				}
			}
		})
	}
}

// gotune import's OSU parser reads the osu format of mbw_mr, multi_lat
// and alltoall back: pattern, sizes and values.
func TestMultiRankOSUImports(t *testing.T) {
	for _, r := range multiFixture() {
		if r.Spec.Pattern == bench.Incast {
			continue // OSU has no incast
		}
		t.Run(string(r.Spec.Pattern), func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, "osu", []bench.Result{r}); err != nil {
				t.Fatal(err)
			}
			tool, got, err := importer.Parse("multi.txt", buf.Bytes())
			if err != nil || tool != "osu" {
				t.Fatalf("tool %q, err %v\n%s", tool, err, buf.String())
			}
			want := map[bench.Pattern]bench.Pattern{bench.MultiBandwidth: bench.Bandwidth, bench.MultiLatency: bench.Latency, bench.AllToAll: bench.AllToAll}[r.Spec.Pattern]
			if got[0].Spec.Pattern != want {
				t.Errorf("pattern %s, want %s", got[0].Spec.Pattern, want)
			}
			if r.Spec.Pattern == bench.MultiBandwidth {
				if len(got) != 2 || got[1].Spec.Pattern != bench.MsgRate || got[0].Spec.Window != 64 {
					t.Fatalf("mbw_mr: %d results, want bw and msgrate of window 64: %+v", len(got), got)
				}
				for k, p := range got[1].Points {
					if p.Median != round2(r.Points[k].MsgRate) {
						t.Errorf("size %d: %v msg/s, want %v", p.Size, p.Median, r.Points[k].MsgRate)
					}
				}
			}
			for k, p := range got[0].Points {
				if p.Size != r.Points[k].Size || p.Median != r.Points[k].Median || p.Validated {
					t.Errorf("point %d: %+v, want size %d median %v", k, p, r.Points[k].Size, r.Points[k].Median)
				}
			}
		})
	}
}

// round2 is v as the osu format prints it.
func round2(v float64) float64 {
	var r float64
	_, _ = fmt.Sscanf(fmt.Sprintf("%.2f", v), "%g", &r)
	return r
}

// A collective's table carries nccl-tests' bandwidths beside the times,
// and its osu block OSU's title for the collective.
func TestCollectiveTableAndOSU(t *testing.T) {
	r := bench.Result{Label: "gotune nccl", Spec: bench.Spec{Transport: "nccl", Pattern: bench.AllReduce, Ranks: 2, Sizes: []int{1 << 20}, Reps: 3}}
	v := 20.0
	r.Points = []bench.Point{{Size: 1 << 20, Iters: 100, Warmup: 10, Unit: "us", Samples: []float64{v, v, v}, Median: v, CILow: v, CIHigh: v,
		Confidence: 0.75, P50: v, P90: v, P99: v, RankMin: 19.5, RankMax: 20.5, AlgBW: 52.43, BusBW: 52.43}}
	for _, c := range []struct{ format, want string }{
		{"table", "algbw (GB/s)"}, {"table", "52.43"}, {"table", "every rank in the collective"},
		{"osu", "# OSU MPI Allreduce Latency Test\n# gotune nccl\n"},
		{"osu", "1048576                20.00             19.50             20.50         100\n"},
	} {
		var buf bytes.Buffer
		if err := Write(&buf, c.format, []bench.Result{r}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), c.want) {
			t.Errorf("%s: no %q in\n%s", c.format, c.want, buf.String())
		}
	}
}
