package importer

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/hostinfo"
)

// Intel(R) MPI Benchmarks, IMB-MPI1: the text rank 0 prints.
//
// A file is one run of IMB-MPI1 holding one table per benchmark and
// process count ("# Benchmarking PingPong", "# #processes = 2"). Each
// table gives Results labelled "IMB-MPI1 NAME VERSION" (" np N" added when
// N is not 2), by its columns:
//
//   - "#bytes #repetitions t[usec] Mbytes/sec" (PingPong, PingPing and
//     their AnySource/SpecificSource kin): a bench.Latency Result of
//     t[usec] and a bench.Bandwidth one of Mbytes/sec, under one label, so
//     that compare matches them with osu_latency and osu_bw. PingPong's
//     t is half the round trip (IMB_parse_name_mpi1.c sets scale_time =
//     0.5), OSU's latency; PingPing's is one message's time while both
//     ranks send at once.
//   - "#bytes #repetitions Mbytes/sec Msg/sec" (Uniband, Biband):
//     bench.Bandwidth (Biband: bench.BiBandwidth, both directions summed,
//     scale_bw = 2, as osu_bibw) and bench.MsgRate.
//   - "... t_min[usec] t_max[usec] t_avg[usec] [Mbytes/sec]" (collectives,
//     Sendrecv, Exchange; Barrier has no #bytes and gets size 0):
//     bench.Pattern of the lower-case name ("allreduce"), t_avg in µs, the
//     average over ranks as OSU's collectives' Avg Latency. Sendrecv's and
//     Exchange's Mbytes/sec count several messages per call
//     (scale_bw 2 and 4) and match no gotune pattern: not imported.
//   - a trailing "defects" column (IMB built with -DCHECK): 0 sets
//     Point.Validated, anything else keeps the row with a warning.
//
// Other layouts (IMB-NBC's t_ovrl, -multi's Group column) and the other
// IMB binaries' parts are refused with the line. A size IMB gave up on
// ("16 time-out.; Time limit ...", "out-of-mem.") has no value: it stays in
// Spec.Sizes, gets no Point, and the last measured point of the table
// carries IMB's reason as a warning (IMB runs no larger size after it).
// A run must end with "# All processes entering MPI_Finalize": a file
// without it was cut short and is refused.
//
// Units: IMB's Mbytes/sec is 10^6 bytes/s since IMB 2018 (2021.11
// src_c/IMB_output.c:285 and v2018.0 src/IMB_output.c:314: "static double
// MEGA = 1.0 / 1e6", throughput = scale_bw * MEGA * size / t) and 2^20
// bytes/s in IMB 3.x (IMB_output.c of IMB 3.2: "static double MEGA =
// 1.0/1048576.0"): 3.x values are multiplied by 1.048576. Versions
// between (4.x, 2017) were not checked: their values are taken as 10^6
// bytes/s and every such bandwidth point says so in a warning.

const imbTool = "imb"

var (
	imbVersionRE   = regexp.MustCompile(`^#\s+Intel ?\(R\) MPI Benchmarks?(?: Suite)? V?(\S+?),\s*(\S+) part`)
	imbBenchRE     = regexp.MustCompile(`^# Benchmarking (?:(Multi-))?(\S+)\s*$`)
	imbProcessesRE = regexp.MustCompile(`^# #processes = (\d+)`)
	imbReleaseRE   = regexp.MustCompile(`^# Release\s+:\s*(\S.*?)\s*$`)
	imbFailureRE   = regexp.MustCompile(`^(\d+)\s+((?:time-out|out-of-mem|int-overflow)\..*)$`)
)

// imbFinalize is the last line IMB prints.
const imbFinalize = "# All processes entering MPI_Finalize"

func init() {
	register(Parser{Tool: imbTool, Detect: detectIMB, Parse: parseIMB})
}

// detectIMB looks for IMB's banner or a table IMB alone heads this way.
func detectIMB(lines []string) bool {
	return slices.ContainsFunc(lines, func(l string) bool {
		return imbVersionRE.MatchString(l) || strings.HasPrefix(l, "# Benchmarking ")
	})
}

// imbTable is one benchmark's table being read.
type imbTable struct {
	name    string
	procs   int
	line    int      // of "# Benchmarking"
	cols    []string // the column header's fields
	sizes   []int
	seen    map[int]bool
	points  [2][]bench.Point // per Result: [0] the time or bandwidth, [1] the second one
	failure string           // IMB's reason for giving up on a size
}

// parseIMB reads an IMB-MPI1 output.
func parseIMB(name string, lines []string) ([]bench.Result, error) {
	version, part := "", ""
	prov := hostinfo.Provenance{}
	var results []bench.Result
	var t *imbTable
	finished := false
	flush := func() error {
		if t == nil {
			return nil
		}
		if t.cols == nil {
			return lineErrorf(name, t.line, "IMB %s: no column header after it", t.name)
		}
		rs, err := t.results(version, prov)
		if err != nil {
			return lineErrorf(name, t.line, "IMB %s: %w", t.name, err)
		}
		results = append(results, rs...)
		t = nil
		return nil
	}
	for n, s := range nonBlank(lines) {
		if finished {
			return nil, lineErrorf(name, n, "IMB output goes on after %q", imbFinalize)
		}
		switch {
		case s == imbFinalize:
			if err := flush(); err != nil {
				return nil, err
			}
			finished = true
			continue
		case strings.HasPrefix(s, "#") && !strings.HasPrefix(s, "#bytes") && !strings.HasPrefix(s, "#repetitions"):
			if m := imbVersionRE.FindStringSubmatch(lines[n-1]); m != nil {
				version, part = m[1], m[2]
				if part != "MPI-1" {
					return nil, lineErrorf(name, n, "IMB %s part: only IMB-MPI1 output is supported", part)
				}
			} else if m := imbReleaseRE.FindStringSubmatch(s); m != nil {
				prov.Kernel = m[1]
			} else if m := imbBenchRE.FindStringSubmatch(s); m != nil {
				if err := flush(); err != nil {
					return nil, err
				}
				if m[1] != "" {
					return nil, lineErrorf(name, n, "IMB Multi-%s (-multi): per-group tables are not supported", m[2])
				}
				if version == "" {
					return nil, lineErrorf(name, n, "IMB table before the \"Intel(R) MPI Benchmarks\" banner: a cut file?")
				}
				t = &imbTable{name: m[2], line: n}
			} else if m := imbProcessesRE.FindStringSubmatch(s); m != nil && t != nil {
				t.procs, _ = strconv.Atoi(m[1])
			}
			continue
		}
		if t == nil {
			return nil, lineErrorf(name, n, "a row outside any IMB benchmark table")
		}
		f := strings.Fields(s)
		if strings.HasPrefix(f[0], "#") {
			if t.cols != nil {
				return nil, lineErrorf(name, n, "IMB %s: a second column header", t.name)
			}
			if err := imbCheckColumns(t.name, f); err != nil {
				return nil, lineErrorf(name, n, "IMB %w", err)
			}
			t.cols = f
			continue
		}
		if t.cols == nil {
			return nil, lineErrorf(name, n, "IMB %s: a row before the column header", t.name)
		}
		if err := t.row(s, f); err != nil {
			return nil, lineErrorf(name, n, "IMB %s: %w", t.name, err)
		}
	}
	if !finished {
		return nil, lineErrorf(name, len(lines), "IMB output ends without %q: the run was cut short", imbFinalize)
	}
	return results, nil
}

// imbLayouts are the column headers read, without a trailing "defects".
var imbLayouts = [][]string{
	{"#bytes", "#repetitions", "t[usec]", "Mbytes/sec"},
	{"#bytes", "#repetitions", "Mbytes/sec", "Msg/sec"},
	{"#bytes", "#repetitions", "t_min[usec]", "t_max[usec]", "t_avg[usec]"},
	{"#bytes", "#repetitions", "t_min[usec]", "t_max[usec]", "t_avg[usec]", "Mbytes/sec"},
	{"#repetitions", "t_min[usec]", "t_max[usec]", "t_avg[usec]"},
}

func imbCheckColumns(bench string, cols []string) error {
	c := cols
	if c[len(c)-1] == "defects" {
		c = c[:len(c)-1]
	}
	for _, l := range imbLayouts {
		if slices.Equal(l, c) {
			return nil
		}
	}
	return fmt.Errorf("%s: unsupported columns %q", bench, strings.Join(cols, " "))
}

// row reads one row of the table (s is the line, f its fields).
func (t *imbTable) row(s string, f []string) error {
	if t.failure != "" {
		return fmt.Errorf("a row after IMB gave up on a size")
	}
	if m := imbFailureRE.FindStringSubmatch(s); m != nil && t.cols[0] == "#bytes" {
		size, err := parseBytes(m[1])
		if err != nil {
			return err
		}
		t.sizes = append(t.sizes, size)
		t.failure = fmt.Sprintf("IMB gave up at size %d: %s", size, m[2])
		return nil
	}
	if t.cols[0] != "#bytes" && len(t.points[0]) > 0 {
		return fmt.Errorf("a second row in a table without sizes")
	}
	if len(f) != len(t.cols) {
		return fmt.Errorf("%d fields, want %d (%s): a truncated or foreign line?", len(f), len(t.cols), strings.Join(t.cols, " "))
	}
	size := 0
	p := bench.Point{}
	var second *bench.Point
	for i, c := range t.cols {
		v := f[i]
		switch c {
		case "#bytes":
			var err error
			if size, err = parseBytes(v); err != nil {
				return err
			}
			if t.seen[size] {
				return fmt.Errorf("size %d repeated", size)
			}
			if t.seen == nil {
				t.seen = map[int]bool{}
			}
			t.seen[size] = true
			continue
		case "#repetitions":
			k, err := strconv.Atoi(v)
			if err != nil || k < 0 {
				return fmt.Errorf("#repetitions %q: want a whole number", v)
			}
			p.Iters = k
			continue
		}
		x, err := parseMeasure(v)
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
		switch c {
		case "t[usec]", "t_avg[usec]":
			p.Unit, p.Samples, p.Median = "us", []float64{x}, x
		case "Mbytes/sec":
			if p.Unit == "" { // Uniband, Biband: the first Result
				p.Unit, p.Samples, p.Median = "MB/s", []float64{x}, x
			} else if t.cols[2] == "t[usec]" { // PingPong, PingPing: the second
				q := bench.Point{Unit: "MB/s", Samples: []float64{x}, Median: x}
				second = &q
			}
		case "Msg/sec":
			q := bench.Point{Unit: "msg/s", Samples: []float64{x}, Median: x}
			second = &q
		case "defects":
			if x == 0 {
				p.Validated = true
			} else {
				p.Warnings = append(p.Warnings, fmt.Sprintf("IMB check found defects: %s", v))
			}
		}
	}
	p.Size = size
	t.sizes = append(t.sizes, size)
	t.points[0] = append(t.points[0], p)
	if second != nil {
		second.Size, second.Iters, second.Validated, second.Warnings = size, p.Iters, p.Validated, slices.Clone(p.Warnings)
		t.points[1] = append(t.points[1], *second)
	}
	return nil
}

// imbBandwidthFactor converts a version's Mbytes/sec to MB/s (10^6 bytes
// per second); checked is false where the version's unit was not read.
func imbBandwidthFactor(version string) (factor float64, checked bool) {
	major, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(major)
	switch {
	case err != nil:
		return 1, false
	case n >= 2018:
		return 1, true
	case n == 3:
		return 1 << 20 / 1e6, true
	}
	return 1, false
}

// results turns a complete table into its Results.
func (t *imbTable) results(version string, prov hostinfo.Provenance) ([]bench.Result, error) {
	if len(t.points[0]) == 0 {
		if t.failure != "" {
			return nil, fmt.Errorf("%s", t.failure)
		}
		return nil, fmt.Errorf("no rows: a truncated run?")
	}
	if t.failure != "" {
		last := &t.points[0][len(t.points[0])-1]
		last.Warnings = append(last.Warnings, t.failure)
		if n := len(t.points[1]); n > 0 {
			t.points[1][n-1].Warnings = append(t.points[1][n-1].Warnings, t.failure)
		}
	}
	label := "IMB-MPI1 " + t.name + " " + version
	if t.procs != 0 && t.procs != 2 {
		label += fmt.Sprintf(" np %d", t.procs)
	}
	var patterns [2]bench.Pattern
	switch t.cols[2] {
	case "t[usec]":
		patterns = [2]bench.Pattern{bench.Latency, bench.Bandwidth}
	case "Mbytes/sec":
		patterns = [2]bench.Pattern{bench.Bandwidth, bench.MsgRate}
		if strings.EqualFold(t.name, "Biband") {
			patterns[0] = bench.BiBandwidth
		}
	default:
		patterns[0] = bench.Pattern(strings.ToLower(t.name))
	}
	factor, checked := imbBandwidthFactor(version)
	validate := t.cols[len(t.cols)-1] == "defects"
	var out []bench.Result
	for i, pattern := range patterns {
		if pattern == "" || len(t.points[i]) == 0 {
			continue
		}
		points := t.points[i]
		for j := range points {
			p := &points[j]
			if p.Unit != "MB/s" {
				continue
			}
			p.Median *= factor
			p.Samples[0] = p.Median
			if !checked {
				p.Warnings = append(p.Warnings, fmt.Sprintf("IMB %s: Mbytes/sec taken as 10^6 bytes/s (this version's unit was not checked)", version))
			}
		}
		out = append(out, bench.Result{
			Label:      label,
			Provenance: withLibrary(prov, imbTool, version),
			Spec: bench.Spec{Transport: "mpi", Pattern: pattern, Sizes: slices.Clone(t.sizes), Reps: 1,
				Validate: validate},
			Points: points,
		})
	}
	return out, nil
}
