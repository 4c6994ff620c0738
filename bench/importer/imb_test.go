package importer

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
)

func TestIMBGolden(t *testing.T) {
	goldens(t, "imb", imbTool)
}

// find returns the result of label and pattern.
func find(t *testing.T, rs []bench.Result, label string, p bench.Pattern) bench.Result {
	t.Helper()
	for _, r := range rs {
		if r.Label == label && r.Spec.Pattern == p {
			return r
		}
	}
	t.Fatalf("no result %q %s", label, p)
	return bench.Result{}
}

// The Open MPI run: PingPong gives latency and bw under one label,
// Uniband bw and msgrate, Allreduce its t_avg. Uniband's row "65536 462
// 12876.26 196476": msg/s x size / 10^6 is its Mbytes/sec, the 10^6 of
// IMB_output.c's MEGA.
func TestIMBResults(t *testing.T) {
	rs := checkGolden(t, "testdata/imb/imb_mpi1_2021.11_openmpi.txt", imbTool)
	if len(rs) != 9 {
		t.Fatalf("%d results, want 9 (PingPong, PingPing, Uniband, Biband: 2 each; Allreduce)", len(rs))
	}
	lat := find(t, rs, "IMB-MPI1 PingPong 2021.11", bench.Latency)
	bw := find(t, rs, "IMB-MPI1 PingPong 2021.11", bench.Bandwidth)
	if p := lat.Points[len(lat.Points)-1]; p.Size != 65536 || p.Median != 6.73 || p.Unit != "us" || p.Iters != 640 {
		t.Errorf("PingPong latency at 64K: %+v", p)
	}
	if p := bw.Points[len(bw.Points)-1]; p.Median != 9734.98 || p.Unit != "MB/s" {
		t.Errorf("PingPong bandwidth at 64K: %+v", p)
	}
	uni := find(t, rs, "IMB-MPI1 Uniband 2021.11", bench.Bandwidth).Points
	rate := find(t, rs, "IMB-MPI1 Uniband 2021.11", bench.MsgRate).Points
	last, lastRate := uni[len(uni)-1], rate[len(rate)-1]
	if lastRate.Unit != "msg/s" || math.Abs(lastRate.Median*65536/1e6-last.Median) > 0.01 {
		t.Errorf("Uniband 64K: %v msg/s x 65536 / 1e6 != %v MB/s", lastRate.Median, last.Median)
	}
	find(t, rs, "IMB-MPI1 Biband 2021.11", bench.BiBandwidth)
	ar := find(t, rs, "IMB-MPI1 Allreduce 2021.11", bench.Pattern("allreduce"))
	if p := ar.Points[1]; p.Size != 4 || p.Median != 0.40 || p.Unit != "us" {
		t.Errorf("Allreduce t_avg at 4 B: %+v", p)
	}
	if lat.Provenance.Libraries["imb"] != "2021.11" || lat.Provenance.Kernel == "" || lat.Spec.Transport != "mpi" {
		t.Errorf("provenance %+v spec %+v", lat.Provenance, lat.Spec)
	}
}

// IMB 3.x's Mbytes/sec is 2^20 bytes/s: 65536 B in 10 us is 6250 of them,
// 6553.6 MB/s.
func TestIMBMebibytes(t *testing.T) {
	rs := checkGolden(t, "testdata/imb/imb_mpi1_3.2.4_pingpong.txt", imbTool)
	p := find(t, rs, "IMB-MPI1 PingPong 3.2.4", bench.Bandwidth).Points[1]
	if p.Size != 65536 || math.Abs(p.Median-6553.6) > 1e-9 || p.Samples[0] != p.Median {
		t.Errorf("3.2.4 PingPong 64K: %+v, want 6553.6 MB/s", p)
	}
	if f, ok := imbBandwidthFactor("4.1"); f != 1 || ok {
		t.Errorf("4.1: factor %v checked %v, want 1 unchecked", f, ok)
	}
}

// MPICH's run timed out in Biband at 16 B: the size stays asked, gets no
// point, and the last point says why.
func TestIMBTimeOut(t *testing.T) {
	rs := checkGolden(t, "testdata/imb/imb_mpi1_2021.11_mpich_timeout.txt", imbTool)
	bi := find(t, rs, "IMB-MPI1 Biband 2021.11", bench.BiBandwidth)
	last := bi.Points[len(bi.Points)-1]
	if !slices.Contains(bi.Spec.Sizes, 16) || last.Size != 8 || len(last.Warnings) != 1 || !strings.Contains(last.Warnings[0], "time-out") {
		t.Errorf("sizes %v, last point %+v", bi.Spec.Sizes, last)
	}
	barrier := find(t, rs, "IMB-MPI1 Barrier 2021.11", bench.Pattern("barrier"))
	if len(barrier.Points) != 1 || barrier.Points[0].Size != 0 || barrier.Points[0].Median != 0.71 {
		t.Errorf("barrier %+v", barrier.Points)
	}
}

func TestIMBErrors(t *testing.T) {
	_, err := parseFixture(t, "testdata/imb/imb_mpi1_2021.11_truncated.txt")
	checkLineError(t, err, "imb_mpi1_2021.11_truncated.txt", 119, "3 fields, want 4")

	const head = "#    Intel(R) MPI Benchmarks 2021.11, MPI-1 part\n# Benchmarking PingPong\n# #processes = 2\n       #bytes #repetitions      t[usec]   Mbytes/sec\n"
	const end = "\n# All processes entering MPI_Finalize\n"
	checkLineErrors(t, []lineErrorCase{
		{"value.txt", head + "0 1000 0.22 0.00\n1 1000 abc 4.12\n" + end, 6, []string{"t[usec]", "not a number"}},
		{"cut.txt", head + "0 1000 0.22 0.00\n", 5, []string{"cut short"}},
		{"repeat.txt", head + "0 1000 0.22 0.00\n0 1000 0.22 0.00\n" + end, 6, []string{"size 0 repeated"}},
		{"after.txt", head + "0 1000 0.22 0.00\n" + end + "0 1 2 3\n", 8, []string{"goes on after"}},
		{"columns.txt", "#    Intel(R) MPI Benchmarks 2021.11, MPI-1 part\n# Benchmarking Ibcast\n #bytes #repetitions t_ovrl[usec] t_pure[usec] t_CPU[usec] overlap[%]\n", 3, []string{"unsupported columns"}},
		{"part.txt", "#    Intel(R) MPI Benchmarks 2021.11, MPI-2 part\n", 1, []string{"only IMB-MPI1"}},
		{"banner.txt", "# Benchmarking PingPong\n", 1, []string{"banner"}},
		{"outside.txt", "#    Intel(R) MPI Benchmarks 2021.11, MPI-1 part\n0 1000 0.22 0.00\n", 2, []string{"outside any IMB benchmark"}},
		{"multi.txt", "#    Intel(R) MPI Benchmarks 2021.11, MPI-1 part\n# Benchmarking Multi-PingPong\n", 2, []string{"-multi"}},
	})
}

func FuzzIMB(f *testing.F) { fuzzParser(f, "imb", parseIMB, true, nil) }
