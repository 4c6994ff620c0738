package mpistack

import (
	"errors"
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
)

// perftestOutput is ucx_perftest 1.13's client output with -f -v.
const perftestOutput = `+----------------------------------------------------------------------------------------------------------+
| API:          protocol layer                                                                             |
| Test:         tag match bandwidth                                                                        |
+----------------------------------------------------------------------------------------------------------+
iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr
 200,2.510,2.525,2.525,24753.92,24753.92,396063,396063
`

func TestParsePerftest(t *testing.T) {
	tests := []struct {
		name, out, column string
		want              float64
		err               string
	}{
		{"latency", perftestOutput, "overall_lat", 2.525, ""},
		{"bandwidth", perftestOutput, "overall_bw", 24753.92, ""},
		{"message rate", perftestOutput, "overall_mr", 396063, ""},
		{"unknown column", perftestOutput, "overall_bibw", 0, "no column overall_bibw"},
		{"no result", "UCX ERROR Failed to run test\n", "overall_lat", 0, "no CSV result line"},
		{"header only", "iterations,overall_lat\n", "overall_lat", 0, "CSV header without values"},
		{"short line", "iterations,overall_lat\n200\n", "overall_lat", 0, "1 values for 2 columns"},
		{"not a number", "iterations,overall_lat\n200,fast\n", "overall_lat", 0, "invalid syntax"},
		{"negative", "iterations,overall_lat\n200,-1\n", "overall_lat", 0, "non-negative"},
		{"a UCX warning between header and values", "iterations,overall_lat\n[1732611234.123456] [vm:4242 :0]     parser.c:2036 UCX  WARN  unused env variable: UCX_CONFIG_DIR\n200,2.5\n", "overall_lat", 2.5, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePerftest([]byte(tt.out), tt.column)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, %v; want an error containing %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func perftestOrSkip(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("ucx_perftest")
	testutil.SkipUnless(t, "ucx", err)
}

// TestRunUCX runs real server and client pairs: a few sizes, few
// iterations, per pattern; with UCX_TLS naming shared memory and without.
func TestRunUCX(t *testing.T) {
	perftestOrSkip(t)
	sizes := []int{8, 64 << 10}
	tests := []struct {
		pattern bench.Pattern
		env     []string
	}{
		{bench.Latency, nil},
		{bench.Bandwidth, nil},
		{bench.MsgRate, nil},
		{bench.Bandwidth, []string{"UCX_TLS=posix,self"}},
	}
	for _, tt := range tests {
		name := string(tt.pattern) + "/" + strings.Join(tt.env, ",")
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			u := UCX{Name: "ucx test", Env: tt.env}
			spec := bench.Spec{Pattern: tt.pattern, Sizes: sizes, Reps: 2, Iters: 200, Warmup: 10, Window: 16}
			res, err := RunUCX(ctx, u, spec)
			if err != nil {
				t.Fatal(err)
			}
			if res.Label != "ucx test" || res.Spec.Transport != "ucx test" || res.Provenance.Libraries["ucx"] == "" {
				t.Errorf("label %q, transport %q, libraries %v", res.Label, res.Spec.Transport, res.Provenance.Libraries)
			}
			if len(res.Points) != len(sizes) {
				t.Fatalf("%d points for %d sizes", len(res.Points), len(sizes))
			}
			for i, p := range res.Points {
				if p.Size != sizes[i] || p.Unit != tt.pattern.Unit() || p.Iters != 200 || p.Warmup != 10 || len(p.Samples) != 2 {
					t.Errorf("point %d: %+v", i, p)
				}
				for _, v := range append([]float64{p.Median, p.P50, p.P99}, p.Samples...) {
					if !(v > 0) || math.IsInf(v, 0) {
						t.Errorf("size %d: value %v is not positive and finite", p.Size, v)
					}
				}
			}
			t.Logf("%s: %v %s", name, []float64{res.Points[0].Median, res.Points[1].Median}, tt.pattern.Unit())
		})
	}
}

func TestRunUCXFailures(t *testing.T) {
	perftestOrSkip(t)
	ctx := t.Context()
	spec := bench.Spec{Pattern: bench.Latency, Sizes: []int{8}, Reps: 1, Iters: 100, Warmup: 1}
	start := time.Now()
	_, err := RunUCX(ctx, UCX{Env: []string{"UCX_TLS=nosuchtl"}}, spec)
	if err == nil || errors.Is(err, ErrHang) || !strings.Contains(err.Error(), "run ucx_perftest for ucx: tag_lat size 8 repetition 0") {
		t.Errorf("UCX_TLS naming no transport: %v, want a failure naming the run", err)
	}
	t.Logf("%v after %v", err, time.Since(start))

	_, err = RunUCX(ctx, UCX{Perftest: "no-such-ucx-perftest-gotune"}, spec)
	if !errors.Is(err, sys.ErrNotSupported) || !strings.Contains(err.Error(), "no-such-ucx-perftest-gotune not found") {
		t.Errorf("missing tool: %v, want ErrNotSupported naming it", err)
	}
	for _, bad := range []bench.Spec{
		{Pattern: bench.BiBandwidth, Sizes: []int{8}},
		{Pattern: bench.Latency, Sizes: []int{8}, Validate: true},
		{Pattern: bench.Latency},
	} {
		if _, err := RunUCX(ctx, UCX{}, bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
