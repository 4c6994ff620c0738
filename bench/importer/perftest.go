package importer

import (
	"fmt"
	"regexp"
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
)

// ptGbToMB: --report_gbits' Gb/s is 10^9 bits/s, 125 MB/s.
const ptGbToMB = 125.0

func init() {
	register(Parser{Tool: ptTool, Detect: detectPerftest, Parse: parsePerftest})
}

func detectPerftest(lines []string) bool {
	for _, l := range lines {
		if ptBWHdr.MatchString(l) || ptLatHdr.MatchString(l) || ptDurHdr.MatchString(l) {
			return true
		}
		if ptTitle.MatchString(l) {
			return true
		}
	}
	return false
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
	label   string
	pattern bench.Pattern
	unit    string
	points  []bench.Point
}

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
	add := func(label string, pat bench.Pattern, unit string, p bench.Point) error {
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
		for _, q := range s.points {
			if q.Size == p.Size {
				return fmt.Errorf("size %d of %s measured twice: one run per size", p.Size, label)
			}
		}
		s.points = append(s.points, p)
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
			if err := ptRow(table, strings.Fields(t), add); err != nil {
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
		r := bench.Result{Label: s.label,
			Spec: bench.Spec{Transport: ptTool, Pattern: s.pattern, Reps: 1}, Points: s.points}
		for _, p := range s.points {
			r.Spec.Sizes = append(r.Spec.Sizes, p.Size)
		}
		out = append(out, r)
	}
	return out, nil
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
func ptRow(tb *ptTable, f []string, add func(string, bench.Pattern, string, bench.Point) error) error {
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
		if v[j], err = strconv.ParseFloat(f[j], 64); err != nil || v[j] < 0 {
			return fmt.Errorf("value %d %q: not a non-negative number", j+1, f[j])
		}
	}
	switch tb.kind {
	case "bw": // bytes iters peak avg mpps
		p := singleRunPoint(size, "MB/s", v[3]*tb.bwFactor)
		p.Iters = iters
		if err := add(tb.label, tb.pattern, "MB/s", p); err != nil {
			return err
		}
		q := singleRunPoint(size, "msg/s", v[4]*1e6)
		q.Iters = iters
		return add(tb.label+" msgrate", bench.MsgRate, "msg/s", q)
	case "lat": // bytes iters min max typical avg stdev p99 p99.9
		p := singleRunPoint(size, "us", v[5])
		p.P50, p.P99, p.Iters = v[4], v[7], iters
		return add(tb.label, bench.Latency, "us", p)
	default: // bytes iters t_avg tps
		p := singleRunPoint(size, "us", v[2])
		p.Iters = iters
		return add(tb.label, bench.Latency, "us", p)
	}
}
