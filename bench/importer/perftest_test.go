package importer

import (
	"os"
	"strings"
	"testing"
)

func TestPerftestGolden(t *testing.T) { impGoldens(t, "perftest", ptTool) }

func TestPerftestUnits(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile("testdata/perftest/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	_, rs, err := Parse("ib_read_bw_gbits_loop.txt", read("ib_read_bw_gbits_loop.txt"))
	if err != nil {
		t.Fatal(err)
	}
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
	_, rs, err = Parse("ib_write_bw_all.txt", read("ib_write_bw_all.txt"))
	if err != nil {
		t.Fatal(err)
	}
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
	_, rs, err = Parse("ib_send_lat_all.txt", read("ib_send_lat_all.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// " 64  1000  0.99  6.32  1.04  1.07  0.04  1.25  3.32": t_avg is the
	// value, t_typical P50, the 99% column P99.
	if p := impPoint(t, rs[0], 64); !impNear(p.Median, 1.07) || !impNear(p.P50, 1.04) || !impNear(p.P99, 1.25) || rs[0].Spec.Pattern != "latency" {
		t.Errorf("64 B latency %+v, want 1.07 us, p50 1.04, p99 1.25", p)
	}
	_, rs, err = Parse("ib_send_bw_bidir_mib.txt", read("ib_send_bw_bidir_mib.txt"))
	if err != nil || rs[0].Spec.Pattern != "bibw" {
		t.Errorf("bidirectional: %v %+v", err, rs)
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

func TestPerftestErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"bad value", strings.Replace(ptSmall, "10570.71", "10570,71", 1), 7, "value 4 \"10570,71\""},
		{"cut-off row", ptSmall[:strings.Index(ptSmall, " 131072")+20] + "\n", 8, "a cut-off line"},
		{"no closing rule", ptSmall[:strings.LastIndex(ptSmall, "\n---")+1], 8, "truncated output"},
		{"twice", strings.Replace(ptSmall, " 131072 ", " 65536  ", 1), 8, "measured twice"},
		{"no title", strings.Replace(ptSmall, "RDMA_Write BW Test", "", 1), 6, "before the test's title"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool, _, err := impParseText(t, "x.txt", tc.text)
			if tool != ptTool {
				t.Fatalf("detected as %q", tool)
			}
			impWantLineError(t, err, "x.txt", tc.line, tc.want)
		})
	}
}

func FuzzPerftest(f *testing.F) { impFuzz(f, "perftest", parsePerftest) }
