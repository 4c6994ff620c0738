package output

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/transports"
)

// FloorFormats are the formats WriteFloor writes.
var FloorFormats = []string{"table", "osu", "bench"}

// WriteFloor writes the cache-line floor f beside latency result r, after
// r's own output in format. table and osu: a line naming the floor, then
// each size's one-way latency and its ratio to the floor (in osu as "#"
// lines, which scripts reading osu_latency's rows skip), with the two-line
// figure where f has one. bench: a BenchmarkFloor line per run of the
// cheaper way of polling and a BenchmarkFloor/lines=2 line per two-line
// run, one-way ns/op, which benchstat lists beside the Latency lines.
func WriteFloor(w io.Writer, format string, r bench.Result, f bench.Floor) error {
	if !slices.Contains(FloorFormats, format) {
		return fmt.Errorf("floor: format %q (want one of %s)", format, strings.Join(FloorFormats, ", "))
	}
	if r.Spec.Pattern != bench.Latency {
		return fmt.Errorf("floor: beside a %s result (want latency)", r.Spec.Pattern)
	}
	bw := bufio.NewWriter(w)
	cpus := cpuList(f.CPUs, ",")
	if format == "bench" {
		for i, ns := range f.Runs {
			if f.Fenced != (i%2 == 1) { // runs alternate: flat out, fenced
				continue
			}
			fmt.Fprintf(bw, "BenchmarkFloor/cpus=%s %d%s\n", cpus, f.Trips, metric(ns, "ns/op"))
		}
		for _, ns := range f.TwoRuns {
			fmt.Fprintf(bw, "BenchmarkFloor/lines=2/cpus=%s %d%s\n", cpus, f.Trips, metric(ns, "ns/op"))
		}
		return flushFloor(bw)
	}
	prefix := ""
	if format == "osu" {
		prefix = "# "
	}
	way := "flat out"
	if f.Fenced {
		way = "fenced"
	}
	fmt.Fprintf(bw, "\n%sfloor: one cache line between CPUs %s, %.1f ns one way (median of %d runs of %d round trips, polling %s)\n",
		prefix, cpuList(f.CPUs, " and "), f.Median, len(f.Runs)/2, f.Trips, way)
	if f.TwoLines > 0 {
		fmt.Fprintf(bw, "%s       two lines, one per direction as one-way channels move it: %.1f ns one way (%.2fx)\n",
			prefix, f.TwoLines, f.TwoLines/f.Median)
	}
	fmt.Fprintf(bw, "%s%-8s %12s %8s\n", prefix, "Size", "Latency (us)", "x floor")
	for _, p := range r.Points {
		fmt.Fprintf(bw, "%s%-8s %12.2f %8.2f\n", prefix, transports.FormatSize(p.Size), p.Median, p.Median*1e3/f.Median)
	}
	return flushFloor(bw)
}

// cpuList writes CPUs with sep between them: "1,2" as --cpus reads them.
func cpuList(cpus []int, sep string) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, sep)
}

func flushFloor(bw *bufio.Writer) error {
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	return nil
}
