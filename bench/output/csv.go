package output

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"

	"github.com/gotune/gotune/bench"
)

var csvHeader = []string{
	"label", "transport", "pattern", "size", "unit",
	"median", "ci_low", "ci_high", "confidence", "p50", "p90", "p99",
	"reps", "iters", "warmup", "window", "validated", "host", "gotune_version",
	"mem", "gpus", "gpu_load", "load_late",
}

// writeCSV writes a header row, then a row per point of every result.
func writeCSV(w io.Writer, results []bench.Result) error {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	for _, r := range results {
		for _, p := range r.Points {
			cw.Write([]string{
				r.Label, r.Spec.Transport, string(r.Spec.Pattern), strconv.Itoa(p.Size), p.Unit,
				csvFloat(p.Median), csvFloat(p.CILow), csvFloat(p.CIHigh), csvFloat(p.Confidence),
				csvFloat(p.P50), csvFloat(p.P90), csvFloat(p.P99),
				strconv.Itoa(len(p.Samples)), strconv.Itoa(p.Iters), strconv.Itoa(p.Warmup),
				strconv.Itoa(r.Spec.Window), strconv.FormatBool(p.Validated),
				r.Provenance.Host, r.Provenance.Gotune,
				memKinds(r.Spec), bench.FormatGPUs(r.Spec.GPUs), csvFloat(r.Spec.GPULoad), strconv.Itoa(p.LoadLate),
			})
		}
	}
	cw.Flush()
	return cw.Error()
}

// memKinds writes the ranks' buffer kinds as --mem reads them ("" for a
// host run).
func memKinds(s bench.Spec) string {
	kinds := make([]string, len(s.Mem))
	for i, k := range s.Mem {
		kinds[i] = k.String()
	}
	return strings.Join(kinds, ",")
}

// csvFloat writes the shortest decimal, without exponent, that reads back
// as exactly v.
func csvFloat(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}
