package output

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/gotune/gotune/bench"
)

// Formats lists the format names, in this order: table, json, csv, osu, bench.
var Formats = []string{"table", "json", "csv", "osu", "bench"}

// Write renders results in format to w.
func Write(w io.Writer, format string, results []bench.Result) error {
	var render func(io.Writer, []bench.Result) error
	switch format {
	case "table":
		render = writeTable
	case "json":
		render = writeJSON
	case "csv":
		render = writeCSV
	case "osu":
		render = writeOSU
	case "bench":
		render = writeBench
	default:
		return fmt.Errorf("unknown report format %q (want one of %s)", format, strings.Join(Formats, ", "))
	}
	// Renderers may ignore errors of single writes: bufio keeps the first
	// one and Flush reports it.
	bw := bufio.NewWriter(w)
	err := render(bw, results)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return fmt.Errorf("%s report: %w", format, err)
	}
	return nil
}

// names holds how each pattern is called in OSU titles and Go benchmark
// names.
var names = map[bench.Pattern]struct{ osu, gobench string }{
	bench.Latency:     {"Latency Test", "Latency"},
	bench.Bandwidth:   {"Bandwidth Test", "BW"},
	bench.BiBandwidth: {"Bi-Directional Bandwidth Test", "BiBW"},
	bench.MsgRate:     {"Multiple Bandwidth / Message Rate Test", "MsgRate"},
	bench.AllocChurn:  {"Bandwidth Test, buffers allocated per message", "AllocBW"},
}
