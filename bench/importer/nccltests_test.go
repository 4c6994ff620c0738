package importer

import (
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
)

// parseText parses an inline fixture.
func impParseText(t *testing.T, name, text string) (string, []bench.Result, error) {
	t.Helper()
	return Parse(name, []byte(text))
}

// point finds a result's point of a size.
func impPoint(t *testing.T, r bench.Result, size int) bench.Point {
	t.Helper()
	for _, p := range r.Points {
		if p.Size == size {
			return p
		}
	}
	t.Fatalf("%s: no point of size %d", r.Label, size)
	return bench.Point{}
}

// result finds a result by label.
func impResult(t *testing.T, rs []bench.Result, label string) bench.Result {
	t.Helper()
	var labels []string
	for _, r := range rs {
		if r.Label == label {
			return r
		}
		labels = append(labels, r.Label)
	}
	t.Fatalf("no result %q among %q", label, labels)
	return bench.Result{}
}

func impNear(a, b float64) bool { d := a - b; return d < 1e-9*max(1, b) && d > -1e-9*max(1, b) }

func TestNCCLTestsGolden(t *testing.T) { goldens(t, "nccl-tests", ncclTool) }

func TestNCCLTestsUnits(t *testing.T) {
	rs := parsed(t, "testdata/nccl-tests/all_reduce_h100x8.txt")
	if len(rs) != 6 {
		t.Fatalf("%d results, want 6 (2 placements x time, algbw, busbw)", len(rs))
	}
	// "33554432 ... 208.41  161.00  281.75  0  206.55  162.45  284.29  0":
	// GB/s is 10^9 bytes/s, so 281.75 GB/s is 281750 MB/s.
	bus := impResult(t, rs, "nccl-tests all_reduce float/sum out-of-place busbw")
	if p := impPoint(t, bus, 33554432); !impNear(p.Median, 281750) || p.Unit != "MB/s" || !p.Validated || p.Iters != 20 || p.Warmup != 5 {
		t.Errorf("busbw point %+v, want 281750 MB/s, validated, 20 iters, 5 warm-up", p)
	}
	tm := impResult(t, rs, "nccl-tests all_reduce float/sum in-place time")
	if p := impPoint(t, tm, 33554432); !impNear(p.Median, 206.55) || p.Unit != "us" {
		t.Errorf("time point %+v, want 206.55 us", p)
	}
	alg := impResult(t, rs, "nccl-tests all_reduce float/sum in-place algbw")
	if p := impPoint(t, alg, 33554432); !impNear(p.Median, 162450) {
		t.Errorf("algbw point %+v, want 162450 MB/s", p)
	}
	if tm.Spec.Pattern != "all_reduce" || tm.Provenance.Libraries["nccl-tests"] != "2.17.4" || tm.Provenance.Libraries["nccl"] != "2.27.3" {
		t.Errorf("pattern %q, libraries %v", tm.Spec.Pattern, tm.Provenance.Libraries)
	}
	if n := len(tm.Provenance.Ranks); n != 8 || tm.Provenance.Ranks[7].GPU.Name != "NVIDIA H100 80GB HBM3" || tm.Provenance.Host != "h100-node01" {
		t.Errorf("provenance %+v, want 8 H100 ranks on h100-node01", tm.Provenance)
	}
}

func TestNCCLTestsWrongAndUnchecked(t *testing.T) {
	rs := parsed(t, "testdata/nccl-tests/sendrecv_wrong.txt")
	p := impPoint(t, impResult(t, rs, "nccl-tests sendrecv float/sum out-of-place busbw"), 262144)
	if p.Validated || len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "#wrong 64") {
		t.Errorf("a size with 64 wrong elements: %+v, want a warning and not validated", p)
	}
	if p := impPoint(t, impResult(t, rs, "nccl-tests sendrecv float/sum in-place busbw"), 262144); !p.Validated || p.Warnings != nil {
		t.Errorf("the in-place run of that size was right: %+v", p)
	}
	rs = parsed(t, "testdata/nccl-tests/reduce_scatter_nocheck.txt")
	if p := rs[0].Points[0]; p.Validated || p.Warnings != nil || rs[0].Spec.Pattern != "reduce_scatter" {
		t.Errorf("-c 0 (N/A): %+v, pattern %q, want unvalidated without warning, reduce_scatter", p, rs[0].Spec.Pattern)
	}
}

const ncclSmall = `# nThread 1 nGpus 2 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    10.00    0.00    0.00      0    10.00    0.00    0.00      0
          16             4     float     sum      -1    10.00    0.00    0.00      0    10.00    0.00    0.00      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0
`

func TestNCCLTestsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file, text string
		line             int
		want             string
	}{
		{"bad value", "all_reduce_perf.txt", strings.Replace(ncclSmall, "10.00    0.00    0.00      0\n          16", "1x.00    0.00    0.00      0\n          16", 1), 6, "time \"1x.00\""},
		{"cut-off row", "all_reduce_perf.txt", ncclSmall[:strings.Index(ncclSmall, "          16")+40] + "\n", 7, "a cut-off line"},
		{"no summary", "all_reduce_perf.txt", ncclSmall[:strings.Index(ncclSmall, "# Out of")], 7, "truncated output"},
		{"repeated size", "all_reduce_perf.txt", strings.Replace(ncclSmall, "          16             4", "           8             4", 1), 7, "appears twice"},
		{"no collective", "run.txt", ncclSmall, 0, "which collective"},
		{"failure", "all_reduce_perf.txt", strings.Replace(ncclSmall, "# Out of", "node1: Test NCCL failure common.cu:958 'unhandled system error'\n# Out of", 1), 8, "the run failed"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantParseError(t, ncclTool, tc.file, tc.text, tc.line, tc.want) })
	}
	// The collective from a pasted command line.
	_, rs, err := impParseText(t, "run.txt", "$ mpirun -np 2 ./build/alltoall_perf -b 8 -e 16\n"+ncclSmall)
	if err != nil || rs[0].Spec.Pattern != "alltoall" {
		t.Fatalf("pattern from the command line: %v %v", rs, err)
	}
}

func FuzzNCCLTests(f *testing.F) { fuzzParser(f, "nccl-tests", parseNCCLTests, false, nil) }
