package output

import (
	"bytes"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fixture returns fixed results: latency over 3 sizes, bandwidth over 2 and
// a message rate from another host whose CPU model is unknown.
func fixture() []bench.Result {
	prov := hostinfo.Provenance{
		Host:      "node1",
		CPUModel:  "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz",
		Cores:     64,
		NUMANodes: 2,
		Kernel:    "6.1.0-18-amd64",
		GoVersion: "go1.26.8",
		Gotune:    "v0.3.0",
		Libraries: map[string]string{"openmpi": "4.1.4"},
		Time:      time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC),
	}
	other := prov
	other.Host, other.CPUModel, other.Libraries = "node2", "", nil
	return []bench.Result{
		{
			Label:      "gotune sm",
			Provenance: prov,
			Spec:       bench.Spec{Transport: "sm", Pattern: bench.Latency, Sizes: []int{8, 4096, 1 << 20}, Reps: 5, Window: 64},
			Points: []bench.Point{
				{Size: 8, Iters: 10000, Warmup: 100, Unit: "us", Samples: []float64{0.21, 0.2, 0.22, 0.21, 0.23},
					Median: 0.21, CILow: 0.2, CIHigh: 0.23, Confidence: 0.95, P50: 0.2, P90: 0.25, P99: 0.41,
					Warnings: []string{"need >= 6 samples for confidence interval at level 0.95"}},
				{Size: 4096, Iters: 10000, Warmup: 100, Unit: "us", Samples: []float64{0.61, 0.6, 0.64, 0.62, 0.61},
					Median: 0.61, CILow: 0.6, CIHigh: 0.64, Confidence: 0.95, P50: 0.6, P90: 0.68, P99: 1.02, Validated: true},
				{Size: 1 << 20, Iters: 1000, Warmup: 10, Unit: "us", Samples: []float64{61.5, 60.25, 62.75, 61.0, 63.125},
					Median: 61.5, CILow: 60.25, CIHigh: 63.125, Confidence: 0.95, P50: 61.2, P90: 64.8, P99: 70.4},
			},
		},
		{
			Label:      "openmpi vader cma",
			Provenance: prov,
			Spec:       bench.Spec{Transport: "cma", Pattern: bench.Bandwidth, Sizes: []int{65536, 4 << 20}, Reps: 3, Window: 64},
			Points: []bench.Point{
				{Size: 65536, Iters: 20, Warmup: 2, Unit: "MB/s", Samples: []float64{9876.5, 10012.25, 9950},
					Median: 9950, CILow: 9876.5, CIHigh: 10012.25, Confidence: 0.95, P50: 9948, P90: 10100.5, P99: 10230},
				{Size: 4 << 20, Iters: 20, Warmup: 2, Unit: "MB/s", Samples: []float64{12001.5, 11890, 12100.75},
					Median: 12001.5, CILow: 11890, CIHigh: 12100.75, Confidence: 0.95, P50: 12000, P90: 12150, P99: 12200},
			},
		},
		{
			Label:      "gotune cudaipc full load",
			Provenance: prov,
			Spec: bench.Spec{Transport: "cudaipc", Pattern: bench.Latency, Sizes: []int{1024, 1 << 20}, Reps: 3, Window: 64,
				Mem: []cuda.MemKind{cuda.MemDevice, cuda.MemPinned}, GPUs: []int{0, 1}, GPULoad: 1, GPULoadBound: 2 * time.Second},
			Points: []bench.Point{
				{Size: 1024, Iters: 100, Warmup: 10, Unit: "us", Samples: []float64{10.5, 10.25, 10.75},
					Median: 10.5, CILow: 10.25, CIHigh: 10.75, Confidence: 0.95, P50: 10.4, P90: 11, P99: 12.5, LoadWait: 2890 * time.Microsecond},
				{Size: 1 << 20, Iters: 100, Warmup: 10, Unit: "us", Samples: []float64{20030.5, 20031.25, 20029.75},
					Median: 20030.5, CILow: 20029.75, CIHigh: 20031.25, Confidence: 0.95, P50: 45.5, P90: 47, P99: 2000000, LoadLate: 4,
					LoadWait: 1999 * time.Millisecond, LoadStalled: true},
			},
		},
		{
			Label:      "gotune sm rate",
			Provenance: other,
			Spec:       bench.Spec{Transport: "sm", Pattern: bench.MsgRate, Sizes: []int{8, 1024}, Reps: 3, Window: 64},
			Points: []bench.Point{
				{Size: 8, Iters: 100, Warmup: 10, Unit: "msg/s", Samples: []float64{8.25e6, 8.5e6, 8.125e6},
					Median: 8.25e6, CILow: 8.125e6, CIHigh: 8.5e6, Confidence: 0.95, P50: 8.3e6, P90: 8.6e6, P99: 8.7e6},
				{Size: 1024, Iters: 100, Warmup: 10, Unit: "msg/s", Samples: []float64{4.5e6, 4.25e6, 4.75e6},
					Median: 4.5e6, CILow: 4.25e6, CIHigh: 4.75e6, Confidence: 0.95, P50: 4.4e6, P90: 4.8e6, P99: 4.9e6},
			},
		},
	}
}

// pinPlatform makes the bench format's goos and goarch lines the same on
// every machine.
func pinPlatform(t *testing.T) {
	oldOS, oldArch := goos, goarch
	goos, goarch = "linux", "amd64"
	t.Cleanup(func() { goos, goarch = oldOS, oldArch })
}

func render(t *testing.T, format string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, format, fixture()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestGolden(t *testing.T) {
	pinPlatform(t)
	for _, format := range Formats {
		t.Run(format, func(t *testing.T) {
			testutil.Golden(t, filepath.Join("testdata", "results."+format), render(t, format), *update)
		})
	}
}

func TestUnknownFormat(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, "xml", fixture())
	if err == nil {
		t.Fatal("Write with format xml succeeded")
	}
	for _, want := range append([]string{`"xml"`}, Formats...) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if buf.Len() != 0 {
		t.Errorf("wrote %q before failing", buf.String())
	}
}

func TestUnknownPattern(t *testing.T) {
	results := fixture()
	results[1].Spec.Pattern = "pingpong"
	for _, format := range []string{"osu", "bench"} {
		if err := Write(&bytes.Buffer{}, format, results); err == nil || !strings.Contains(err.Error(), "pingpong") {
			t.Errorf("%s: got error %v, want one naming the pattern", format, err)
		}
	}
}
