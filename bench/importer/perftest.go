package importer

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gotune/gotune/bench"
)

// perftest (linux-rdma/perftest): ib_{write,read,send,atomic}_{bw,lat}.
//
// The test comes from perftest's title line ("RDMA_Write BW Test",
// "Send Latency Test", "RDMA_Write Bidirectional BW Test"), the size of
// each row from its #bytes column; -a prints every size in one table, and
// a file of several runs (a loop over -s) is read table by table. Runs of
// the same test, device and connection type make one Result; a size
// measured twice is refused.
//
// Bandwidth tables give a Result of pattern bw (bibw for Bidirectional)
// from "BW average" and one of pattern msgrate from "MsgRate[Mpps]"
// (10^6 messages/s). Their unit is in the header: "MB/sec" (perftest up to
// 4.5-0.2x) and "MiB/sec" (later) are both 2^20 bytes/s, and "Gb/sec"
// (--report_gbits) is 10^9 bits/s: print_report_bw in
// src/perftest_parameters.c divides by format_factor = (report_fmt == MBS)
// ? 0x100000 : 125000000. BW peak is not kept: it is the best single
// iteration, not the run.
//
// Latency tables give a Result of pattern latency: Median is t_avg (the
// run's mean, comparable with gotune's per-repetition means), P50 is
// t_typical (the median iteration), P99 the "99% percentile" column.
// perftest already halves the round trip of write and send (rtt_factor in
// print_report_lat), and reports read and atomic latency as the whole
// round trip, since the operation is one: the values are kept as printed.
// Duration mode (-D: "t_avg[usec]    tps average") gives t_avg alone.
//
// Rows without a clock: perftest times in CPU cycles and converts them
// with get_cpu_mhz (src/get_clock.c), which returns 0 when its sampling
// fits badly and says so on stderr ("Correlation coefficient r^2: 0.81 <
// 0.9"). With -F (cpu_freq_f) perftest still prints that size's row,
// computed with 0 cycles per microsecond: bandwidth, peak and message rate
// all 0, latencies inf, stdev -nan (seen in real runs under emulation,
// testdata/perftest/real_*). Such a row measured nothing: its size stays in
// Spec.Sizes without a Point, and the series' last point says which sizes
// went unmeasured and why; a series with no measured row is refused. A NaN
// or inf in a column not imported (a stdev of -nan) is accepted.
//
// stderr in the file: perftest flushes stdout after each bandwidth row
// before the row's newline, so with 2>&1 (or on a terminal) the stderr
// message lands at the row's end: "... 0.012639Correlation coefficient r^2:
// 0.815 < 0.9", the newline following alone. Such a message is cut from
// its line and the line joined with the next, which restores the row.

const ptTool = "perftest"

var (
	ptTitle   = regexp.MustCompile(`^\s*(Send|RDMA_Write|RDMA_Read|Atomic|Write_imm|Send_imm)\s+(.*?)\s*Test\s*$`)
	ptDevice  = regexp.MustCompile(`Device\s+:\s+(\S+)`)
	ptConn    = regexp.MustCompile(`Connection type\s+:\s+(\S+)`)
	ptBWHdr   = regexp.MustCompile(`^\s*#bytes\s+(#sl\s+)?#iterations\s+BW peak\[(MB|MiB|Gb)/sec\]\s+BW average\[(MB|MiB|Gb)/sec\]\s+MsgRate\[Mpps\]`)
	ptLatHdr  = regexp.MustCompile(`^\s*#bytes\s+#iterations\s+t_min\[usec\]\s+t_max\[usec\]\s+t_typical\[usec\]\s+t_avg\[usec\]\s+t_stdev\[usec\]\s+99% percentile\[usec\]`)
	ptDurHdr  = regexp.MustCompile(`^\s*#bytes\s+#iterations\s+t_avg\[usec\]\s+tps average`)
	ptCycles  = regexp.MustCompile(`^\s*#bytes\s+#iterations\s+t_min\[cycles\]`)
	ptRule    = regexp.MustCompile(`^-{20,}$`)
	ptBinary  = regexp.MustCompile(`\bib_(write|read|send|atomic)_(bw|lat)\b`)
	ptMiBToMB = float64(1<<20) / 1e6
	// ptStderr: perftest's stderr messages that can land inside a table.
	ptStderr = regexp.MustCompile(`Correlation coefficient r\^2: \S+ < 0\.9\s*$`)
)

// ptGbToMB: --report_gbits' Gb/s is 10^9 bits/s, 125 MB/s.
const ptGbToMB = 125.0

func init() {
	register(Parser{Tool: ptTool, Detect: detectPerftest, Parse: parsePerftest})
}

func detectPerftest(lines []string) bool {
	return slices.ContainsFunc(lines, func(l string) bool {
		return ptBWHdr.MatchString(l) || ptLatHdr.MatchString(l) || ptDurHdr.MatchString(l) || ptTitle.MatchString(l)
	})
}

// ptTable is an open results table: its kind and what precedes it.
type ptTable struct {
	kind     string  // "bw", "lat", "dur"
	qos      bool    // a #sl column follows #bytes
	bwFactor float64 // MB/s per printed bandwidth unit
	label    string
	pattern  bench.Pattern
}

type ptSeries struct {
	label      string
	pattern    bench.Pattern
	unit       string
	sizes      []int // every row's size, measured or not, in order
	points     []bench.Point
	unmeasured []int // sizes printed without a clock
	firstLine  int   // index of the first unmeasured row
}

// ptUnmeasured: a row perftest printed without a clock (see above).
const ptUnmeasured = "perftest printed it without a clock (get_cpu_mhz failed: \"Correlation coefficient r^2 < 0.9\"; bandwidth 0, latency inf)"

func parsePerftest(name string, lines []string) ([]bench.Result, error) {
	fail := func(i int, format string, args ...any) error {
		return &LineError{File: name, Line: i + 1, Err: fmt.Errorf("perftest: "+format, args...)}
	}
	var (
		title, verb, device, conn, binary string
		table                             *ptTable
		series                            []*ptSeries
		rowsIn, lastRow                   int // rows of the open table, the last row's index
	)
	lines = ptCutStderr(lines)
	// add records a row's point; p == nil for a row measured without a clock.
	add := func(i int, label string, pat bench.Pattern, unit string, size int, p *bench.Point) error {
		var s *ptSeries
		for _, x := range series {
			if x.label == label {
				s = x
			}
		}
		if s == nil {
			s = &ptSeries{label: label, pattern: pat, unit: unit}
			series = append(series, s)
		}
		if slices.Contains(s.sizes, size) {
			return fmt.Errorf("size %d of %s measured twice: one run per size", size, label)
		}
		s.sizes = append(s.sizes, size)
		if p == nil {
			if len(s.unmeasured) == 0 {
				s.firstLine = i
			}
			s.unmeasured = append(s.unmeasured, size)
			return nil
		}
		s.points = append(s.points, *p)
		return nil
	}
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case ptTitle.MatchString(l):
			m := ptTitle.FindStringSubmatch(l)
			verb, title = m[1], strings.TrimSpace(m[2])
			device, conn, table = "", "", nil
		case strings.HasPrefix(t, "Dual-port") && ptDevice.MatchString(t):
			device = ptDevice.FindStringSubmatch(t)[1]
		case strings.HasPrefix(t, "Connection type") && ptConn.MatchString(t):
			conn = ptConn.FindStringSubmatch(t)[1]
		case ptCycles.MatchString(l):
			return nil, fail(i, "latency reported in cycles (-C/--report-cycles): rerun without it to import microseconds")
		case ptBWHdr.MatchString(l), ptLatHdr.MatchString(l), ptDurHdr.MatchString(l):
			if verb == "" {
				return nil, fail(i, "a results table before the test's title line (\"RDMA_Write BW Test\"): keep perftest's whole output")
			}
			tb := &ptTable{}
			switch {
			case ptBWHdr.MatchString(l):
				m := ptBWHdr.FindStringSubmatch(l)
				tb.kind, tb.qos = "bw", m[1] != ""
				if m[2] != m[3] {
					return nil, fail(i, "BW peak in %s/sec but BW average in %s/sec", m[2], m[3])
				}
				tb.bwFactor = ptMiBToMB
				if m[2] == "Gb" {
					tb.bwFactor = ptGbToMB
				}
				tb.pattern = bench.Bandwidth
				if strings.Contains(title, "Bidirectional") {
					tb.pattern = bench.BiBandwidth
				}
			case ptLatHdr.MatchString(l):
				tb.kind, tb.pattern = "lat", bench.Latency
			default:
				tb.kind, tb.pattern = "dur", bench.Latency
			}
			tb.label = ptLabel(binary, verb, title, conn, device)
			table, rowsIn = tb, 0
		case table != nil && t != "" && t[0] >= '0' && t[0] <= '9':
			if err := ptRow(table, strings.Fields(t), func(label string, pat bench.Pattern, unit string, size int, p *bench.Point) error {
				return add(i, label, pat, unit, size, p)
			}); err != nil {
				return nil, fail(i, "%w", err)
			}
			rowsIn, lastRow = rowsIn+1, i
		case table != nil && ptRule.MatchString(t):
			if rowsIn > 0 { // the rule that closes a table
				table = nil
			}
		default:
			if binary == "" {
				if m := ptBinary.FindString(l); m != "" {
					binary = m
				}
			}
		}
	}
	if table != nil && rowsIn > 0 {
		return nil, fail(lastRow, "the table has no closing rule (---): truncated output")
	}
	var out []bench.Result
	for _, s := range series {
		if len(s.points) == 0 {
			return nil, fail(s.firstLine, "%s: no row measured: %s", s.label, ptUnmeasured)
		}
		if len(s.unmeasured) > 0 {
			last := &s.points[len(s.points)-1]
			rows := "the row of size " + ptSizeList(s.unmeasured) + " has"
			if len(s.unmeasured) > 1 {
				rows = "the rows of sizes " + ptSizeList(s.unmeasured) + " have"
			}
			last.Warnings = append(last.Warnings, fmt.Sprintf("%s no value: %s", rows, ptUnmeasured))
		}
		out = append(out, bench.Result{Label: s.label,
			Spec: bench.Spec{Transport: ptTool, Pattern: s.pattern, Sizes: s.sizes, Reps: 1}, Points: s.points})
	}
	return out, nil
}

// ptCutStderr returns lines with perftest's stderr messages cut out: the
// rest of a line that ends in one continues on the next line (the stdout
// text the message interrupted), so the two are joined and the next left
// empty, keeping every line's number.
func ptCutStderr(lines []string) []string {
	out := lines
	for i := range out {
		// next: the line that continues line i, past those already joined
		// (a line can end in a message again, the next line another).
		for next := i + 1; ; next++ {
			loc := ptStderr.FindStringIndex(out[i])
			if loc == nil {
				break
			}
			if &out[0] == &lines[0] {
				out = slices.Clone(lines)
			}
			out[i] = out[i][:loc[0]]
			if next < len(out) {
				out[i] += out[next]
				out[next] = ""
			}
		}
	}
	return out
}

func ptSizeList(sizes []int) string {
	s := make([]string, len(sizes))
	for i, n := range sizes {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// ptLabel names a series: "perftest ib_write_bw RC mlx5_0", or from the
// title where no command line names the binary ("perftest RDMA_Write BW").
func ptLabel(binary, verb, title, conn, device string) string {
	l := "perftest "
	if binary != "" && !strings.Contains(title, "Bidirectional") && !strings.Contains(title, "Post List") {
		l += binary
	} else {
		l += verb + " " + title
	}
	for _, s := range []string{conn, device} {
		if s != "" {
			l += " " + s
		}
	}
	return strings.TrimSpace(l)
}

// ptRow reads one row of a table into its series' points.
func ptRow(tb *ptTable, f []string, add func(string, bench.Pattern, string, int, *bench.Point) error) error {
	n := map[string]int{"bw": 5, "lat": 9, "dur": 4}[tb.kind] // values a row holds
	want := n
	if tb.qos {
		want++
	}
	if len(f) < want {
		return fmt.Errorf("%d values, want %d: a cut-off line?", len(f), want)
	}
	size, err := strconv.Atoi(f[0])
	if err != nil || size < 0 {
		return fmt.Errorf("#bytes %q: not a size", f[0])
	}
	if tb.qos {
		f = append(f[:1:1], f[2:]...) // drop #sl
	}
	iters, err := strconv.Atoi(f[1])
	if err != nil || iters < 0 {
		return fmt.Errorf("#iterations %q: not a count", f[1])
	}
	v := make([]float64, n)
	for j := 2; j < len(v) && j < len(f); j++ {
		if v[j], err = ptFloat(f[j]); err != nil || v[j] < 0 {
			return fmt.Errorf("value %d %q: not a non-negative number", j+1, f[j])
		}
	}
	// finite reports whether the imported columns are numbers.
	finite := func(cols ...int) bool {
		for _, c := range cols {
			if math.IsInf(v[c], 0) || math.IsNaN(v[c]) {
				return false
			}
		}
		return true
	}
	switch tb.kind {
	case "bw": // bytes iters peak avg mpps
		if !finite(3, 4) || v[2] == 0 && v[3] == 0 && v[4] == 0 {
			if err := add(tb.label, tb.pattern, "MB/s", size, nil); err != nil {
				return err
			}
			return add(tb.label+" msgrate", bench.MsgRate, "msg/s", size, nil)
		}
		p := singleRunPoint(size, "MB/s", v[3]*tb.bwFactor)
		p.Iters = iters
		if err := add(tb.label, tb.pattern, "MB/s", size, &p); err != nil {
			return err
		}
		q := singleRunPoint(size, "msg/s", v[4]*1e6)
		q.Iters = iters
		return add(tb.label+" msgrate", bench.MsgRate, "msg/s", size, &q)
	case "lat": // bytes iters min max typical avg stdev p99 p99.9
		if !finite(4, 5, 7) {
			return add(tb.label, bench.Latency, "us", size, nil)
		}
		p := singleRunPoint(size, "us", v[5])
		p.P50, p.P99, p.Iters = v[4], v[7], iters
		return add(tb.label, bench.Latency, "us", size, &p)
	default: // bytes iters t_avg tps
		if !finite(2) {
			return add(tb.label, bench.Latency, "us", size, nil)
		}
		p := singleRunPoint(size, "us", v[2])
		p.Iters = iters
		return add(tb.label, bench.Latency, "us", size, &p)
	}
}

// ptFloat reads a printed value; glibc prints NaN as "nan" or "-nan",
// which strconv refuses with the sign.
func ptFloat(s string) (float64, error) {
	if strings.EqualFold(s, "-nan") {
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}
