package report

import (
	"fmt"
	"io"

	"github.com/gotune/gotune/bench"
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
// osu_bw, osu_bibw and osu_mbw_mr: "#" header lines, then a row per size
// with the median. Blocks are separated by a blank line.
func writeOSU(w io.Writer, results []bench.Result) error {
	for i, r := range results {
		name, ok := names[r.Spec.Pattern]
		if !ok {
			return fmt.Errorf("result %q: unknown pattern %q", r.Label, r.Spec.Pattern)
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "# gotune %s: %s\n", name.osu, r.Label)
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
