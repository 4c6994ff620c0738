package output

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
)

// An imported point holds the tool's one figure: the table calls its
// column what it is and shows no interval or percentiles it does not
// have, where a measured point shows all of them.
func TestTableSaysWhatAPointHolds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		point      bench.Point
		want, lack []string
	}{
		{"imported", bench.Point{Size: 8, Unit: "us", Samples: []float64{0.41}, Median: 0.41},
			[]string{"Reported (us)", "│ CI", "0.41 │ — │ — │ — │ —"}, []string{"Median", "0% CI", "0.00"}},
		{"measured", bench.Point{Size: 8, Unit: "us", Samples: []float64{0.4, 0.41, 0.42}, Median: 0.41,
			CILow: 0.4, CIHigh: 0.42, Confidence: 0.95, P50: 0.41, P90: 0.43, P99: 0.5},
			[]string{"Median (us)", "95% CI", "0.40 – 0.42", "0.43"}, []string{"Reported", "—"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			r := bench.Result{Label: "x", Spec: bench.Spec{Transport: "mpi", Pattern: bench.Latency}, Points: []bench.Point{tc.point}}
			if err := writeTable(&b, []bench.Result{r}); err != nil {
				t.Fatal(err)
			}
			out := strings.Join(strings.Fields(b.String()), " ")
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("table lacks %q:\n%s", w, b.String())
				}
			}
			for _, l := range tc.lack {
				if strings.Contains(out, l) {
					t.Errorf("table shows %q:\n%s", l, b.String())
				}
			}
		})
	}
}
