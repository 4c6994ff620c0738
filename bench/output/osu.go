package output

import (
	"fmt"
	"io"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/transports"
)

// OSU Micro-Benchmarks 7.x print a size left-aligned in 10 columns, then
// each value right-aligned in FIELD_WIDTH columns with FLOAT_PRECISION
// decimals. osu_util.h falls back to a FIELD_WIDTH of 20, but OMB's
// configure.ac defines it as 18, which is what released builds print.
const (
	osuSizeWidth  = 10
	osuFieldWidth = 18
	osuPrecision  = 2
)

// writeOSU writes one block per result in the layout of osu_latency,
// osu_bw, osu_bibw and osu_mbw_mr (the multi-rank patterns: osuMulti): "#" header lines, then a row per size
// with the median. Blocks are separated by a blank line. A GPU run's title
// names its memory kinds, GPUs and load, and a line names the sizes that
// stalled behind the load kernel: rows have no room for either.
func writeOSU(w io.Writer, results []bench.Result) error {
	for i, r := range results {
		name, ok := names[r.Spec.Pattern]
		if !ok {
			return fmt.Errorf("result %q: unknown pattern %q", r.Label, r.Spec.Pattern)
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		if r.Spec.Pattern.MultiRank() {
			osuMulti(w, r, name.osu)
			continue
		}
		fmt.Fprintf(w, "# gotune %s: %s", name.osu, r.Label)
		if g := gpuSetup(r.Spec); g != "" {
			fmt.Fprintf(w, "; %s", g)
		}
		fmt.Fprintln(w)
		if at := stalledAt(r.Points); at != "" {
			fmt.Fprintf(w, "# stalled (a step waited for the GPU load kernel to end) at %s\n", at)
		}
		switch r.Spec.Pattern {
		case bench.Latency:
			osuHeader(w, "Avg Latency(us)")
		case bench.MsgRate:
			fmt.Fprintf(w, "# [ pairs: 1 ] [ window size: %d ]\n", r.Spec.Window)
			osuHeader(w, "MB/s", "Messages/s")
		default:
			osuHeader(w, "Bandwidth (MB/s)")
		}
		for _, p := range r.Points {
			if r.Spec.Pattern == bench.MsgRate {
				osuRow(w, p.Size, p.Median*float64(p.Size)/1e6, p.Median)
			} else {
				osuRow(w, p.Size, p.Median)
			}
		}
	}
	return nil
}

// stalledAt lists the sizes whose points stalled behind the GPU load
// kernel ("" if none did).
func stalledAt(points []bench.Point) string {
	var at []string
	for _, p := range points {
		if p.Stalled() {
			at = append(at, transports.FormatSize(p.Size))
		}
	}
	return strings.Join(at, ", ")
}

func osuHeader(w io.Writer, columns ...string) {
	fmt.Fprintf(w, "%-*s", osuSizeWidth, "# Size")
	for _, c := range columns {
		fmt.Fprintf(w, "%*s", osuFieldWidth, c)
	}
	fmt.Fprintln(w)
}

func osuRow(w io.Writer, size int, values ...float64) {
	fmt.Fprintf(w, "%-*d", osuSizeWidth, size)
	for _, v := range values {
		fmt.Fprintf(w, "%*.*f", osuFieldWidth, osuPrecision, v)
	}
	fmt.Fprintln(w)
}
