package output

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gotune/gotune/bench"
)

// formats are Write's renderers.
var formats = []Format[[]bench.Result]{
	{"table", writeTable}, {"json", writeJSON}, {"csv", writeCSV}, {"osu", writeOSU}, {"bench", writeBench},
}

// Formats lists the format names, in this order: table, json, csv, osu, bench.
var Formats = FormatNames(formats)

// Write renders results in format to w.
func Write(w io.Writer, format string, results []bench.Result) error {
	found, err := Render(w, formats, format, results)
	switch {
	case !found:
		return fmt.Errorf("unknown report format %q (want one of %s)", format, strings.Join(Formats, ", "))
	case err != nil:
		return fmt.Errorf("%s report: %w", format, err)
	}
	return nil
}

// Format is a named way of writing a T.
type Format[T any] struct {
	Name  string
	Write func(io.Writer, T) error
}

// FormatNames lists the names of formats, in their order.
func FormatNames[T any](formats []Format[T]) []string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.Name
	}
	return names
}

// Render writes v to w in the format called name, one of formats (found
// is false for none). The writer sees w buffered: it may ignore the errors
// of single writes, as bufio keeps the first and Flush reports it.
func Render[T any](w io.Writer, formats []Format[T], name string, v T) (found bool, err error) {
	i := slices.IndexFunc(formats, func(f Format[T]) bool { return f.Name == name })
	if i < 0 {
		return false, nil
	}
	bw := bufio.NewWriter(w)
	if err := formats[i].Write(bw, v); err != nil {
		return true, err
	}
	return true, bw.Flush()
}

// names holds how each pattern is called in OSU titles and Go benchmark
// names.
var names = map[bench.Pattern]struct{ osu, gobench string }{
	bench.Latency:     {"Latency Test", "Latency"},
	bench.Bandwidth:   {"Bandwidth Test", "BW"},
	bench.BiBandwidth: {"Bi-Directional Bandwidth Test", "BiBW"},
	bench.MsgRate:     {"Multiple Bandwidth / Message Rate Test", "MsgRate"},
	bench.AllocChurn:  {"Bandwidth Test, buffers allocated per message", "AllocBW"},
	// The multi-rank patterns: OSU's titles where OSU has the benchmark.
	bench.MultiBandwidth: {"Multiple Bandwidth / Message Rate Test", "MultiBW"},
	bench.MultiLatency:   {"Multi Latency Test", "MultiLatency"},
	bench.Incast:         {"Incast Test", "Incast"},
	bench.AllToAll:       {"All-to-All Personalized Exchange Latency Test", "AllToAll"},
	bench.AllReduce:      {"Allreduce Latency Test", "AllReduce"},
	bench.AllGather:      {"Allgather Latency Test", "AllGather"},
	bench.ReduceScatter:  {"Reduce_scatter Latency Test", "ReduceScatter"},
	bench.Broadcast:      {"Broadcast Latency Test", "Broadcast"},
}
