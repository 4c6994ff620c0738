package importer

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
)

func TestPerftestGolden(t *testing.T) { goldens(t, "perftest", ptTool) }

func TestPerftestUnits(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile("testdata/perftest/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	rs := parsed(t, "testdata/perftest/ib_read_bw_gbits_loop.txt")
	// "4096  2000  14.47  14.41  0.439696" with --report_gbits: 14.41 Gb/s
	// is 14.41e9/8 bytes/s = 1801.25 MB/s; 0.439696 Mpps = 439696 msg/s.
	bw := impResult(t, rs, "perftest ib_read_bw RC mlx5_1")
	if len(bw.Points) != 3 {
		t.Fatalf("three runs of one size each make one result of 3 points: %+v", bw)
	}
	if p := impPoint(t, bw, 4096); !impNear(p.Median, 1801.25) || p.Unit != "MB/s" || p.Iters != 2000 {
		t.Errorf("4096 B point %+v, want 1801.25 MB/s", p)
	}
	if p := impPoint(t, impResult(t, rs, "perftest ib_read_bw RC mlx5_1 msgrate"), 4096); !impNear(p.Median, 439696) {
		t.Errorf("message rate %+v, want 439696 msg/s", p)
	}
	rs = parsed(t, "testdata/perftest/ib_write_bw_all.txt")
	// "65536  5000  9793.63  9754.61  0.156074": MB/sec is 2^20 bytes/s.
	line := ""
	for _, l := range strings.Split(string(read("ib_write_bw_all.txt")), "\n") {
		if strings.HasPrefix(l, " 65536 ") {
			line = l
		}
	}
	f := strings.Fields(line)
	if len(f) != 5 {
		t.Fatalf("fixture row %q", line)
	}
	if p := impPoint(t, impResult(t, rs, "perftest ib_write_bw RC mlx5_0"), 65536); f[3] != "9754.61" || !impNear(p.Median, 9754.61*1.048576) {
		t.Errorf("65536 B point %+v from %q, want 9754.61 * 1.048576 MB/s", p, line)
	}
	rs = parsed(t, "testdata/perftest/ib_send_lat_all.txt")
	// " 64  1000  0.99  6.32  1.04  1.07  0.04  1.25  3.32": t_avg is the
	// value, t_typical P50, the 99% column P99.
	if p := impPoint(t, rs[0], 64); !impNear(p.Median, 1.07) || !impNear(p.P50, 1.04) || !impNear(p.P99, 1.25) || rs[0].Spec.Pattern != "latency" {
		t.Errorf("64 B latency %+v, want 1.07 us, p50 1.04, p99 1.25", p)
	}
	rs, err := parseFixture(t, "testdata/perftest/ib_send_bw_bidir_mib.txt")
	if err != nil || rs[0].Spec.Pattern != "bibw" {
		t.Errorf("bidirectional: %v %+v", err, rs)
	}
}

// Real runs (testdata/perftest/real_*, Soft-RoCE under emulation) where
// perftest's clock calibration failed for one size: its stderr message
// cut into a row, and a row printed with 0 cycles per microsecond.
func TestPerftestRealUnmeasured(t *testing.T) {
	parse := func(name string) []bench.Result { t.Helper(); return parsed(t, "testdata/perftest/"+name) }
	// " 2   100   0.08   0.02   0.012639Correlation coefficient r^2: 0.815 < 0.9"
	// then an empty line, then " 4   100   0.00   0.00   0.000000".
	rs := parse("real_ib_write_bw_a.txt")
	for _, label := range []string{"perftest ib_write_bw RC rxe0", "perftest ib_write_bw RC rxe0 msgrate"} {
		r := impResult(t, rs, label)
		if len(r.Spec.Sizes) != 23 || len(r.Points) != 22 || r.Spec.Sizes[1] != 4 || r.Points[1].Size != 8 {
			t.Errorf("%s: sizes %v, %d points: want 23 sizes, 4 B without a point", label, r.Spec.Sizes, len(r.Points))
		}
		last := r.Points[len(r.Points)-1]
		if len(last.Warnings) != 1 || !strings.Contains(last.Warnings[0], "the row of size 4 has no value") {
			t.Errorf("%s: last point's warnings %q", label, last.Warnings)
		}
	}
	if p := impPoint(t, impResult(t, rs, "perftest ib_write_bw RC rxe0 msgrate"), 2); !impNear(p.Median, 12639) {
		t.Errorf("the row the message cut into: %+v, want 12639 msg/s", p)
	}
	// 128 B: "inf inf inf inf -nan inf inf"; 4194304 B: a stdev of -nan
	// beside real values.
	r := parse("real_ib_send_lat_a.server.txt")[0]
	if len(r.Points) != 22 || !slices.Contains(r.Spec.Sizes, 128) {
		t.Errorf("send_lat server: %d points, sizes %v: want 128 B without a point", len(r.Points), r.Spec.Sizes)
	}
	if p := impPoint(t, r, 4194304); !impNear(p.Median, 163506.84) || !impNear(p.P99, 738950.79) {
		t.Errorf("4194304 B %+v, want 163506.84 us (its stdev is -nan)", p)
	}
}

func TestPerftestStderrSplitsRow(t *testing.T) {
	// The message can cut a row anywhere: the rest follows on the next line.
	text := strings.Replace(ptSmall, "10612.98            10570.71",
		"10612.98   Correlation coefficient r^2: 0.8 < 0.9\n         10570.71", 1)
	_, rs, err := impParseText(t, "x.txt", text)
	if err != nil {
		t.Fatal(err)
	}
	if p := impPoint(t, rs[0], 65536); !impNear(p.Median, 10570.71*1.048576) {
		t.Errorf("joined row %+v", p)
	}
	if len(rs[0].Points) != 2 {
		t.Errorf("points %+v", rs[0].Points)
	}
	// Two messages, the second cutting the rest of the row again.
	text = strings.Replace(ptSmall, "10612.98            10570.71",
		"10612.98   Correlation coefficient r^2: 0.8 < 0.9\n  Correlation coefficient r^2: 0.7 < 0.9\n       10570.71", 1)
	if _, rs, err = impParseText(t, "x.txt", text); err != nil || !impNear(impPoint(t, rs[0], 65536).Median, 10570.71*1.048576) {
		t.Errorf("two messages: %v %+v", err, rs)
	}
}

const ptSmall = `---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF		Device         : mlx5_0
 Connection type : RC		Using SRQ      : OFF
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      5000             10612.98            10570.71		   0.169131
 131072     5000             10700.00            10650.00		   0.085200
---------------------------------------------------------------------------------------
`

const ptLatSmall = `                    Send Latency Test
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]
 64       1000          0.99           6.32         1.04  1.07        0.04           1.25           3.32
---------------------------------------------------------------------------------------
`

func TestPerftestErrors(t *testing.T) {
	wantParseErrors(t, ptTool, "x.txt", []parseErrorCase{
		{"bad value", strings.Replace(ptSmall, "10570.71", "10570,71", 1), 7, "value 4 \"10570,71\""},
		{"cut-off row", ptSmall[:strings.Index(ptSmall, " 131072")+20] + "\n", 8, "a cut-off line"},
		{"no closing rule", ptSmall[:strings.LastIndex(ptSmall, "\n---")+1], 8, "truncated output"},
		{"twice", strings.Replace(ptSmall, " 131072 ", " 65536  ", 1), 8, "measured twice"},
		{"no title", strings.Replace(ptSmall, "RDMA_Write BW Test", "", 1), 6, "before the test's title"},
		{"no clock", strings.NewReplacer("10612.98            10570.71\t\t   0.169131", "0.00                0.00\t\t   0.000000",
			"10700.00            10650.00\t\t   0.085200", "0.00                0.00\t\t   0.000000").Replace(ptSmall), 7, "no row measured"},
		{"latency inf", strings.Replace(ptLatSmall, "1.04  1.07", "inf  inf", 1), 3, "no row measured"},
	})
}

func FuzzPerftest(f *testing.F) { fuzzParser(f, "perftest", parsePerftest, false, nil) }
