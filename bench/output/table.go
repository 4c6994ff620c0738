package output

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/transports"
)

// writeTable writes per result a title line, a table of its points and the
// points' warnings. Results are separated by a blank line.
func writeTable(w io.Writer, results []bench.Result) error {
	for i, r := range results {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, title(r))
		if pl := r.Spec.Placement(); pl != "" {
			fmt.Fprintln(w, "placement: "+pl)
		}
		if err := table(w, r); err != nil {
			return fmt.Errorf("result %q: %w", r.Label, err)
		}
		for _, p := range r.Points {
			for _, warning := range p.Warnings {
				fmt.Fprintf(w, "warning: size %s: %s\n", transports.FormatSize(p.Size), warning)
			}
		}
	}
	return nil
}

// title says what was measured, and where and with what.
func title(r bench.Result) string {
	s := fmt.Sprintf("%s: %s over %s", r.Label, r.Spec.Pattern, r.Spec.Transport)
	if g := gpuSetup(r.Spec); g != "" {
		s += "; " + g
	}
	p := r.Provenance
	for _, f := range []struct{ prefix, value string }{
		{"host ", p.Host}, {"", p.CPUModel}, {"kernel ", p.Kernel}, {"gotune ", p.Gotune},
	} {
		if f.value != "" {
			s += "; " + f.prefix + f.value
		}
	}
	return s
}

// gpuSetup names the spec's memory kinds, GPUs and load ("" for a host
// run): "mem device,device gpus 0,1 gpu load full (bound 2s)".
func gpuSetup(s bench.Spec) string {
	var parts []string
	if len(s.Mem) > 0 {
		parts = append(parts, "mem "+memKinds(s))
	}
	if len(s.GPUs) > 0 {
		parts = append(parts, "gpus "+bench.FormatGPUs(s.GPUs))
	}
	if s.GPULoad > 0 {
		parts = append(parts, fmt.Sprintf("gpu load %s (bound %v)", bench.KernelName(s.GPULoad), s.GPULoadBound))
	}
	return strings.Join(parts, " ")
}

// loadCell says whether a point's passes ran beside the load kernel or
// waited for it.
func loadCell(p bench.Point) string {
	if !p.Stalled() {
		return fmt.Sprintf("moved (longest step %v)", p.LoadWait.Round(time.Microsecond))
	}
	return fmt.Sprintf("stalled (waited %v)", p.LoadWait.Round(time.Millisecond))
}

// hasPercentiles says whether p carries a distribution (gotune's own
// points do; an imported one has none).
func hasPercentiles(p bench.Point) bool { return p.P50 != 0 || p.P90 != 0 || p.P99 != 0 }

// none fills a cell the result has no figure for.
const none = "—"

func table(w io.Writer, r bench.Result) error {
	t := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAlignment(tw.AlignRight),
	)
	// An imported point holds the tool's one figure (its average, mostly):
	// no interval, no percentiles. Its cells say so rather than show zeros,
	// and its column is not called a median.
	ci, value, measured := "CI", "Median", false
	for _, p := range r.Points {
		if p.Confidence > 0 {
			ci = strconv.FormatFloat(p.Confidence*100, 'g', 6, 64) + "% CI"
		}
		measured = measured || p.Confidence > 0 || len(p.Samples) > 1 || hasPercentiles(p)
	}
	if len(r.Points) > 0 && !measured {
		value = "Reported"
	}
	unit := r.Spec.Pattern.Unit()
	if len(r.Points) > 0 && r.Points[0].Unit != "" {
		unit = r.Points[0].Unit // imported results carry theirs (nccl-tests' times are µs)
	}
	header := []any{"Size", value + " (" + unit + ")", ci, "p50", "p90", "p99", "Reps"}
	loaded := r.Spec.GPULoad > 0
	if loaded {
		header = append(header, "Beside kernel")
	}
	header = append(header, multiHeader(r.Spec.Pattern)...)
	t.Header(header...)
	// Microseconds and MB/s with 2 decimals; messages per second whole.
	decimals := 2
	if r.Spec.Pattern == bench.MsgRate {
		decimals = 0
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', decimals, 64) }
	for _, p := range r.Points {
		interval, p50, p90, p99 := none, none, none, none
		if p.Confidence > 0 {
			interval = num(p.CILow) + " – " + num(p.CIHigh)
		}
		if hasPercentiles(p) {
			p50, p90, p99 = num(p.P50), num(p.P90), num(p.P99)
		}
		row := []any{transports.FormatSize(p.Size), num(p.Median), interval, p50, p90, p99, strconv.Itoa(len(p.Samples))}
		if loaded {
			row = append(row, loadCell(p))
		}
		row = append(row, multiCells(r.Spec.Pattern, p)...)
		err := t.Append(row...)
		if err != nil {
			return err
		}
	}
	return t.Render()
}
