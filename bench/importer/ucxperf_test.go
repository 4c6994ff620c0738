package importer

import (
	"strings"
	"testing"
)

func TestUCXPerftestGolden(t *testing.T) { goldens(t, "ucx_perftest", ucxTool) }

func TestUCXPerftestUnits(t *testing.T) {
	rs := parsed(t, "testdata/ucx_perftest/tag_lat_ladder.txt")
	if len(rs) != 1 || len(rs[0].Points) != 6 || rs[0].Label != "ucx_perftest tag_lat" || rs[0].Spec.Pattern != "latency" {
		t.Fatalf("want one latency result of 6 sizes, got %d results: %+v", len(rs), rs)
	}
	// "Final:  10000  0.400  0.401  0.401  152.34 ..." after -s 64: the
	// overall latency is the value, the 50.0%ile is P50.
	if p := impPoint(t, rs[0], 64); !impNear(p.Median, 0.401) || !impNear(p.P50, 0.400) || p.Unit != "us" || p.Iters != 10000 {
		t.Errorf("64 B point %+v, want 0.401 us, p50 0.400, 10000 iterations", p)
	}
	rs = parsed(t, "testdata/ucx_perftest/tag_bw_terminal.txt")
	// "Final: 20000 0.109 99.758 101.240 10024.27 9877.51 10024 9878" in
	// the 1048576-byte run: MB/s there is 2^20 bytes/s, so 9877.51 is
	// 9877.51 * 1.048576 = 10357.33 MB/s (10^6 bytes/s).
	bw := impResult(t, rs, "ucx_perftest tag_bw")
	if p := impPoint(t, bw, 1048576); !impNear(p.Median, 9877.51*1.048576) || p.Unit != "MB/s" || bw.Spec.Pattern != "bw" {
		t.Errorf("1 MiB point %+v, want %v MB/s", p, 9877.51*1.048576)
	}
	mr := impResult(t, rs, "ucx_perftest tag_bw msgrate")
	if p := impPoint(t, mr, 1048576); p.Median != 9878 || p.Unit != "msg/s" {
		t.Errorf("1 MiB message rate %+v, want 9878 msg/s", p)
	}
}

const ucxSmall = `+ ucx_perftest 127.0.0.1 -t tag_lat -s 8 -n 100
+--------------+--------------+------------------------------+---------------------+-----------------------+
|              |              |        latency (usec)        |   bandwidth (MB/s)  |  message rate (msg/s) |
+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+
|    Stage     | # iterations | 50.0%ile | average | overall |  average |  overall |  average  |  overall  |
+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+
Final:                   100      0.324     0.322     0.322       23.68      23.68     3104133     3104133
`

func TestUCXPerftestErrors(t *testing.T) {
	wantParseErrors(t, ucxTool, "x.txt", []parseErrorCase{
		{"bad value", strings.Replace(ucxSmall, "0.322     0.322", "0.322     0.3z2", 1), 7, "value 4 \"0.3z2\""},
		{"cut-off row", ucxSmall[:len(ucxSmall)-30] + "\n", 7, "a cut-off line"},
		{"no size", strings.Replace(ucxSmall, " -s 8", "", 1), 7, "which message size"},
		{"twice", ucxSmall + ucxSmall, 14, "measured twice"},
		{"box disagrees", ucxSmall[:strings.Index(ucxSmall, "Final:")] + "| Message size: 16                                   |\n" + ucxSmall[strings.Index(ucxSmall, "Final:"):], 7, "says message size 16, the command line 8"},
		{"csv without test", "iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr\n+ ucx_perftest x -s 8\niterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr\n100,0.1,0.1,0.1,1,1,1,1\n", 4, "which test"},
	})
}

// A file cut before its first result holds no measurement.
func TestUCXPerftestTruncated(t *testing.T) {
	_, _, err := impParseText(t, "x.txt", ucxSmall[:strings.Index(ucxSmall, "Final:")])
	checkLineError(t, err, "x.txt", 0, "no measurements")
}

func FuzzUCXPerftest(f *testing.F) { fuzzParser(f, "ucx_perftest", parseUCXPerftest, false, nil) }
