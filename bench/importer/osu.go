package importer

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/hostinfo"
)

// OSU Micro-Benchmarks (MVAPICH's OMB), MPI benchmarks: what osu_latency,
// osu_bw, osu_bibw, osu_mbw_mr, osu_multi_lat and the blocking collectives
// print on rank 0.
//
// A block is a title line ("# OSU MPI Latency Test v7.4"; "# OSU MPI-CUDA
// ..." with -d cuda), then "#" lines (datatype, window, buffers), a column
// header and a row per size. A file is usually one block; blocks written
// one after the other (a script's loop) give a Result each. Headers of OMB
// 5.x-7.2 ("# Size          Latency (us)") and 7.3+ ("# Size       Avg
// Latency(us)", -z's "P50 Tail Lat(us)" columns) are both read: columns
// are matched by name, so their order and set may vary.
//
// Patterns: osu_latency and its _mp, _mt, _persistent kin and osu_multi_lat
// are bench.Latency; osu_bw Bandwidth; osu_bibw BiBandwidth; osu_mbw_mr
// gives two Results, Bandwidth (its MB/s) and MsgRate (its Messages/s);
// a blocking collective is bench.Pattern of its MPI name in lower case
// ("allreduce", "bcast", "alltoall"), its Avg Latency in µs (the Points'
// Unit says so). Non-blocking, neighbourhood and one-sided benchmarks
// print other columns and are refused.
//
// Units: OMB prints latency in µs and bandwidth in MB/s of 10^6 bytes
// (7.4 c/mpi/pt2pt/standard/osu_bw.c:368 "tmp_total = size / 1e6 *
// options.iterations * window_size", printed as tmp_total / t_total;
// osu_bibw.c:414 the same times 2; osu_mbw_mr.c:663 "size / 1e6 *
// num_pairs"; 7.0.1 c/mpi/pt2pt/osu_bw.c:296 the same), which are
// gotune's units: values are taken as printed.
//
// -z percentiles: OMB sorts the per-iteration values ascending and prints
// the q-th one (osu_util_mpi.c omb_calculate_tail_lat). For latency that
// is gotune's Pq. For bandwidth it is the fast end, while gotune's Pq of a
// rate is the slow end (bench.Summarize): OMB's P(100-q) is gotune's Pq,
// so only P50 (and P10, P1 if asked for with -z 10,1) map; P90 and P99
// tail bandwidths have no gotune field and are not imported.
//
// -c validation: "Pass" sets Point.Validated; "Fail" keeps the row, with
// Validated false and a warning. The run's value is still what OMB
// measured, the failure stays visible in every report of the Result, and
// OMB itself stops the run after a failed size, so refusing the file would
// hide the sizes that passed.
//
// Buffers: "# Send Buffer on DEVICE (D) and Receive Buffer on HOST (H)"
// (OMB up to 7.2 and the one-sided tests' "Rank 0 Memory on ...") sets
// Spec.Mem to rank 0's kind, rank 1's. OMB 7.3+ pt2pt tests print no
// buffer line; a title with -CUDA/-ROCM/-OPENACC then only names the
// accelerator in the Label.

const osuTool = "osu"

var (
	osuTitleRE    = regexp.MustCompile(`^# OSU MPI(-CUDA MANAGED|-CUDA|-ROCM|-OPENACC|-MANAGED)? (.+?) Test(?: v(\S+))?\s*$`)
	osuBuffersRE  = regexp.MustCompile(`^# (?:Send Buffer|Rank 0 Memory) on [A-Z ]*\(([A-Z]+)\) and (?:Receive Buffer|Rank 1 Memory) on [A-Z ]*\(([A-Z]+)\)\s*$`)
	osuDatatypeRE = regexp.MustCompile(`^# Datatype: (\S+?)\.?\s*$`)
	osuWindowRE   = regexp.MustCompile(`^# \[ pairs: (\d+) \] \[ window size: (\d+) \]`)
	// osuColumnRE matches one column name at the start of a header's rest.
	osuColumnRE = regexp.MustCompile(`^(Avg Latency\(us\)|Latency \(us\)|Bandwidth \(MB/s\)|MB/s|Messages/s|Min Latency\(us\)|Max Latency\(us\)|Iterations|Validation|Transmit Size|P(\d+) Tail (Lat\(us\)|BW\(MB/s\)))`)
)

// osuBench is what a title names.
type osuBench struct {
	binary  string
	pattern bench.Pattern // Bandwidth for osu_mbw_mr, which also gives MsgRate
}

// osuPt2pt are the point-to-point titles, without " Test" and version.
var osuPt2pt = map[string]osuBench{
	"Latency":                             {"osu_latency", bench.Latency},
	"Latency Persistent":                  {"osu_latency_persistent", bench.Latency},
	"Multi Latency":                       {"osu_multi_lat", bench.Latency},
	"Multi-process Latency":               {"osu_latency_mp", bench.Latency},
	"Multi-threaded Latency":              {"osu_latency_mt", bench.Latency},
	"Bandwidth":                           {"osu_bw", bench.Bandwidth},
	"Bandwidth Persistent":                {"osu_bw_persistent", bench.Bandwidth},
	"Bi-Directional Bandwidth":            {"osu_bibw", bench.BiBandwidth},
	"Bi-Directional Bandwidth Persistent": {"osu_bibw_persistent", bench.BiBandwidth},
	"Multiple Bandwidth / Message Rate":   {"osu_mbw_mr", bench.Bandwidth},
}

// osuCollectives maps a blocking collective's title word to its MPI name.
var osuCollectives = map[string]string{
	"Allgather": "allgather", "Allgatherv": "allgatherv", "Allreduce": "allreduce",
	"Barrier": "barrier", "Broadcast": "bcast", "Gather": "gather", "Gatherv": "gatherv",
	"Reduce": "reduce", "Reduce_scatter": "reduce_scatter", "Reduce_scatter_block": "reduce_scatter_block",
	"Scatter": "scatter", "Scatterv": "scatterv",
	"All-to-All Personalized Exchange":  "alltoall",
	"All-to-Allv Personalized Exchange": "alltoallv",
	"All-to-Allw Personalized Exchange": "alltoallw",
}

// osuLookup names the benchmark of a title's middle ("Allreduce Latency").
func osuLookup(what string) (osuBench, bool) {
	if b, ok := osuPt2pt[what]; ok {
		return b, true
	}
	coll, ok := strings.CutSuffix(what, " Latency")
	if !ok {
		return osuBench{}, false
	}
	suffix := ""
	if c, ok := strings.CutSuffix(coll, " Persistent"); ok {
		coll, suffix = c, "_persistent"
	}
	name, ok := osuCollectives[coll]
	if !ok {
		return osuBench{}, false
	}
	return osuBench{"osu_" + name + suffix, bench.Pattern(name)}, true
}

func init() {
	register(Parser{Tool: osuTool, Detect: detectOSU, Parse: parseOSU})
}

// detectOSU looks for an OMB MPI title line.
func detectOSU(lines []string) bool {
	return slices.ContainsFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "# OSU MPI") && strings.Contains(l, " Test")
	})
}

// osuColumn is one column of a header after the size.
type osuColumn struct {
	name string
	tail int  // percentile of a "Pq Tail" column, else 0
	bw   bool // a tail of bandwidth (MB/s), not latency
}

// osuHeader splits a column header ("# Size      Bandwidth (MB/s)
// Validation") into its columns; ok is false for a line that is not one.
func osuHeader(l string) (cols []osuColumn, sized, ok bool) {
	rest, sized := strings.CutPrefix(l, "# Size")
	if !sized {
		if rest, ok = strings.CutPrefix(l, "#"); !ok {
			return nil, false, false
		}
	}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		m := osuColumnRE.FindStringSubmatch(rest)
		if m == nil {
			return nil, false, false
		}
		c := osuColumn{name: m[1]}
		if m[2] != "" {
			c.tail, _ = strconv.Atoi(m[2])
			c.bw = m[3] == "BW(MB/s)"
		}
		cols = append(cols, c)
		rest = rest[len(m[0]):]
	}
	return cols, sized, len(cols) > 0
}

// osuBlock is one benchmark's output being read.
type osuBlock struct {
	bench    osuBench
	version  string
	accel    string // "CUDA", "ROCM", ... from the title; "" for host
	datatype string
	mem      []cuda.MemKind
	window   int
	cols     []osuColumn
	sized    bool
	title    int // line of the title (1-based)
	header   int // line of the column header, 0 before it
	seen     map[int]bool
	points   [2][]bench.Point
}

// parseOSU reads every block of an OMB output.
func parseOSU(name string, lines []string) ([]bench.Result, error) {
	var results []bench.Result
	var b *osuBlock
	finish := func() error {
		if b == nil {
			return nil
		}
		if b.header == 0 {
			return lineErrorf(name, b.title, "OSU %s: no column header (# Size ...) after its title: a truncated run?", b.bench.binary)
		}
		if len(b.points[0]) == 0 {
			return lineErrorf(name, b.header, "OSU %s: no rows after the column header: a truncated run?", b.bench.binary)
		}
		results = append(results, b.results()...)
		b = nil
		return nil
	}
	for n, t := range nonBlank(lines) {
		if m := osuTitleRE.FindStringSubmatch(t); m != nil {
			if err := finish(); err != nil {
				return nil, err
			}
			bn, ok := osuLookup(m[2])
			if !ok {
				return nil, lineErrorf(name, n, "OSU benchmark %q is not supported (want latency, bandwidth, message rate or a blocking collective)", strings.TrimPrefix(t, "# "))
			}
			b = &osuBlock{bench: bn, version: m[3], accel: strings.TrimPrefix(m[1], "-"), title: n}
			continue
		}
		if strings.HasPrefix(t, "#") {
			if b == nil {
				continue // a comment before the first title
			}
			if err := b.comment(name, n, t); err != nil {
				return nil, err
			}
			continue
		}
		if b == nil {
			return nil, lineErrorf(name, n, "a row before any OSU title line")
		}
		if b.header == 0 {
			return nil, lineErrorf(name, n, "OSU %s: a row before the column header (# Size ...)", b.bench.binary)
		}
		if err := b.row(t); err != nil {
			return nil, lineErrorf(name, n, "OSU %s: %w", b.bench.binary, err)
		}
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return results, nil
}

// comment reads a "#" line inside a block.
func (b *osuBlock) comment(name string, n int, t string) error {
	if m := osuBuffersRE.FindStringSubmatch(t); m != nil {
		for _, letters := range m[1:] {
			k, err := cuda.ParseMemKind(letters)
			if err != nil {
				return lineErrorf(name, n, "OSU buffers: %w", err)
			}
			b.mem = append(b.mem, k)
		}
		return nil
	}
	if m := osuDatatypeRE.FindStringSubmatch(t); m != nil {
		b.datatype = m[1]
		return nil
	}
	if m := osuWindowRE.FindStringSubmatch(t); m != nil {
		b.window, _ = strconv.Atoi(m[2])
		return nil
	}
	cols, sized, ok := osuHeader(t)
	if !ok {
		if strings.HasPrefix(t, "# Size") {
			return lineErrorf(name, n, "OSU %s: unsupported columns in %q", b.bench.binary, t)
		}
		return nil // other notes: DDT parameters, "# Overall = ..."
	}
	if b.header != 0 {
		return lineErrorf(name, n, "OSU %s: a second column header in one block", b.bench.binary)
	}
	primary := 0
	for _, c := range cols {
		switch c.name {
		case "Avg Latency(us)", "Latency (us)", "Bandwidth (MB/s)", "MB/s":
			primary++
		}
	}
	if primary != 1 || !osuPrimary(cols[0].name) {
		return lineErrorf(name, n, "OSU %s: the header's first column is not latency or bandwidth: %q", b.bench.binary, t)
	}
	b.cols, b.sized, b.header = cols, sized, n
	return nil
}

func osuPrimary(col string) bool {
	switch col {
	case "Avg Latency(us)", "Latency (us)", "Bandwidth (MB/s)", "MB/s":
		return true
	}
	return false
}

// row reads a row of values under the block's header.
func (b *osuBlock) row(t string) error {
	f := strings.Fields(t)
	want := len(b.cols)
	if b.sized {
		want++
	}
	if len(f) != want {
		return fmt.Errorf("%d fields, want %d (%s): a truncated or foreign line?", len(f), want, b.columnNames())
	}
	size := 0
	if b.sized {
		var err error
		if size, err = parseBytes(f[0]); err != nil {
			return err
		}
		f = f[1:]
		if b.seen[size] {
			return fmt.Errorf("size %d repeated", size)
		}
		if b.seen == nil {
			b.seen = map[int]bool{}
		}
		b.seen[size] = true
	} else if len(b.points[0]) > 0 {
		return fmt.Errorf("a second row in a table without sizes")
	}
	unit := "MB/s"
	if strings.Contains(b.cols[0].name, "Latency") {
		unit = "us"
	}
	p := bench.Point{Size: size, Unit: unit}
	var rate *bench.Point
	for i, c := range b.cols {
		v := f[i]
		switch c.name {
		case "Validation":
			switch v {
			case "Pass":
				p.Validated = true
			case "Fail":
				p.Warnings = append(p.Warnings, "OSU validation failed (Fail): the received data did not match what was sent")
			default:
				return fmt.Errorf("validation %q: want Pass or Fail", v)
			}
			continue
		case "Iterations", "Transmit Size":
			k, err := strconv.Atoi(v)
			if err != nil || k < 0 {
				return fmt.Errorf("%s %q: want a whole number", c.name, v)
			}
			if c.name == "Iterations" {
				p.Iters = k
			}
			continue
		}
		x, err := parseMeasure(v)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		switch {
		case i == 0:
			p.Samples, p.Median = []float64{x}, x
		case c.name == "Messages/s":
			q := singleRunPoint(size, "msg/s", x)
			rate = &q
		case c.tail > 0:
			q := c.tail
			if c.bw {
				q = 100 - q // bandwidth: OMB's Pq is gotune's P(100-q)
			}
			switch q {
			case 50:
				p.P50 = x
			case 90:
				p.P90 = x
			case 99:
				p.P99 = x
			}
		}
		// Min and Max Latency have no field of their own.
	}
	b.points[0] = append(b.points[0], p)
	if rate != nil {
		rate.Iters, rate.Validated, rate.Warnings = p.Iters, p.Validated, slices.Clone(p.Warnings)
		b.points[1] = append(b.points[1], *rate)
	}
	return nil
}

func (b *osuBlock) columnNames() string {
	var names []string
	if b.sized {
		names = append(names, "Size")
	}
	for _, c := range b.cols {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// results turns a complete block into its Results.
func (b *osuBlock) results() []bench.Result {
	label := b.bench.binary
	if b.version != "" {
		label += " " + b.version
	}
	if b.datatype != "" && b.datatype != "MPI_CHAR" {
		label += " " + b.datatype
	}
	var mem []cuda.MemKind
	if len(b.mem) == 2 && (b.mem[0] != cuda.MemHost || b.mem[1] != cuda.MemHost) {
		mem = b.mem
		label += fmt.Sprintf(" mem %s,%s", mem[0], mem[1])
	} else if b.accel != "" {
		label += " " + strings.ToLower(b.accel)
	}
	validate := slices.ContainsFunc(b.cols, func(c osuColumn) bool { return c.name == "Validation" })
	var out []bench.Result
	for i, pattern := range []bench.Pattern{b.bench.pattern, bench.MsgRate} {
		if len(b.points[i]) == 0 {
			continue
		}
		var sizes []int
		for _, p := range b.points[i] {
			sizes = append(sizes, p.Size)
		}
		out = append(out, bench.Result{
			Label:      label,
			Provenance: withLibrary(hostinfo.Provenance{}, osuTool, b.version),
			Spec: bench.Spec{Transport: "mpi", Pattern: pattern, Sizes: sizes, Reps: 1,
				Window: b.window, Validate: validate, Mem: slices.Clone(mem)},
			Points: b.points[i],
		})
	}
	return out
}
