package importer

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gotune/gotune/bench"
)

// ucx_perftest (openucx/ucx, src/tools/perf): its table output, its -f
// (final numbers only) output and its -v (CSV) output.
//
// ucx_perftest measures one message size per run, and the client, which
// prints the results, does not print the size or the test: the server
// prints them in its box ("| Test: ...", "| Message size: N"). A file may
// hold many runs (a shell loop over sizes: how a ladder is made), so each
// run's size and test come from what precedes its result row since the
// previous result: the server's box (when server and client share the
// terminal or the file), or the client's command line (a pasted prompt or
// set -x's "+ ucx_perftest ... -t tag_lat -s 4096"). A run with neither is
// refused: a point without its size means nothing. Runs of the same test,
// data layout and transport make one Result, a point per size; a size
// measured twice is refused (one run per size).
//
// The result row is "Final:" (table output), the only row of -f output,
// or the last row of a CSV table ("[thread N]" rows are progress reports).
// Its "overall" columns are the whole run's averages and become the value:
// latency µs (one-way for ping-pong tests: UCX divides the round trip by 2,
// ucx_perf_calc_result in lib/libperf.c), bandwidth and message rate. The
// percentile latency column (50.0%ile, "typical" before UCX 1.12: the
// median of the last iterations) is per-iteration, so it is P50 (or P90,
// P99 when run with -R 90 or 99), not the Median: gotune's samples are
// run averages, and the average is what compares with them.
//
// Latency tests (the header's "latency (usec)"; for CSV, a test UCX
// labels so) give one Result of pattern latency; the others give a
// bandwidth Result and a message-rate Result. UCX's MB/s is 2^20 bytes/s:
// print_progress in perftest_run.c (perftest.c before 1.12) prints
// bandwidth / (1024.0 * 1024.0); it is converted to 10^6 bytes/s.

const ucxTool = "ucx_perftest"

// ucxMiB is UCX's "MB": 1024*1024 bytes.
const ucxMiB = 1 << 20

// ucxTests maps (API, description) as the server's box prints them to the
// test's name, and says whether UCX labels its latency column "latency"
// (ping-pong tests) or "overhead" (streaming tests). From the tests[]
// table of perftest.c.
var ucxTests = []struct {
	name, api, desc string
	latency         bool
}{
	{"am_lat", "uct", "active message latency", true},
	{"put_lat", "uct", "put latency", true},
	{"add_lat", "uct", "atomic add latency", true},
	{"get", "uct", "get latency / bandwidth / message rate", true},
	{"fadd", "uct", "atomic fetch-and-add latency / rate", true},
	{"swap", "uct", "atomic swap latency / rate", true},
	{"cswap", "uct", "atomic compare-and-swap latency / rate", true},
	{"am_bw", "uct", "active message bandwidth / message rate", false},
	{"put_bw", "uct", "put bandwidth / message rate", false},
	{"add_mr", "uct", "atomic add message rate", false},
	{"tag_lat", "ucp", "tag match latency", true},
	{"tag_bw", "ucp", "tag match bandwidth", false},
	{"tag_sync_lat", "ucp", "tag sync match latency", true},
	{"tag_sync_bw", "ucp", "tag sync match bandwidth", false},
	{"ucp_put_lat", "ucp", "put latency", true},
	{"ucp_put_bw", "ucp", "put bandwidth", false},
	{"ucp_get", "ucp", "get latency / bandwidth / message rate", true},
	{"ucp_add", "ucp", "atomic add bandwidth / message rate", false},
	{"ucp_fadd", "ucp", "atomic fetch-and-add latency / bandwidth / rate", true},
	{"ucp_swap", "ucp", "atomic swap latency / bandwidth / rate", true},
	{"ucp_cswap", "ucp", "atomic compare-and-swap latency / bandwidth / rate", true},
	{"stream_bw", "ucp", "stream bandwidth", false},
	{"stream_lat", "ucp", "stream latency", true},
	{"ucp_am_lat", "ucp", "am latency", true},
	{"ucp_am_bw", "ucp", "am bandwidth / message rate", false},
}

var (
	ucxCSVHeader = regexp.MustCompile(`^(?:[^,]*,)*iterations,(?:([0-9.]+)_percentile_lat|typical_lat),avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr$`)
	ucxStageHdr  = regexp.MustCompile(`^\|\s+(Stage|Test)\s+\|\s+# iterations\s+\|\s*(?:([0-9.]+)%ile|typical)\s*\|`)
	ucxKindHdr   = regexp.MustCompile(`^\|\s+\|\s+\|\s+(latency|overhead) \(usec\)\s+\|`)
	ucxBoxLine   = regexp.MustCompile(`^\|\s*(API|Test|Data layout|Message size):\s+(.*?)\s*\|$`)
	ucxCommand   = regexp.MustCompile(`(?:^|[\s/])ucx_perftest(?:\s|$)`)
)

func init() {
	register(Parser{Tool: ucxTool, Detect: detectUCXPerftest, Parse: parseUCXPerftest})
}

func detectUCXPerftest(lines []string) bool {
	return slices.ContainsFunc(lines, func(l string) bool {
		if ucxStageHdr.MatchString(l) || ucxKindHdr.MatchString(l) || ucxCSVHeader.MatchString(l) {
			return true
		}
		m := ucxBoxLine.FindStringSubmatch(l)
		return m != nil && m[1] == "API"
	})
}

// ucxContext is what is known of the next run before its result.
type ucxContext struct {
	test     string // -t name, or the box's description
	api      string // "ucp", "uct" (box), "" if unknown
	layout   string // the box's data layout, UCT only (-D)
	tl       string // -x (UCT)
	size     int    // -1: unknown
	sizeFrom string // "command line" or "server box", for a conflict's message
}

// ucxTable is an open results table.
type ucxTable struct {
	csv     bool
	final   bool   // -f: the table's one row is the result
	kind    string // "latency", "overhead" or "" (CSV)
	rank    float64
	ctx     *ucxContext
	vals    []float64 // the result row's values, nil until one is read
	rowLine int
}

// ucxSeries is the runs of one test, layout and transport.
type ucxSeries struct {
	label   string
	latency bool
	runs    []ucxRun
}

type ucxRun struct {
	size int
	rank float64   // percentile rank of vals[1]
	vals []float64 // the result row, 8 columns
}

func parseUCXPerftest(name string, lines []string) ([]bench.Result, error) {
	fail := func(i int, format string, args ...any) error {
		return &LineError{File: name, Line: i + 1, Err: fmt.Errorf("ucx_perftest: "+format, args...)}
	}
	ctx := ucxContext{size: -1}
	var (
		table  *ucxTable
		kind   string // from the header's first line, for the table that follows
		series []*ucxSeries
	)
	closeTable := func() error {
		t := table
		table = nil
		if t == nil || t.vals == nil {
			return nil
		}
		if err := ucxAddRun(&series, t); err != nil {
			return fail(t.rowLine, "%w", err)
		}
		return nil
	}
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case t == "":
		case ucxCommand.MatchString(t) && (strings.Contains(t, " -t ") || strings.Contains(t, " -s ")):
			if err := closeTable(); err != nil {
				return nil, err
			}
			c, err := ucxParseCommand(t)
			if err != nil {
				return nil, fail(i, "%w", err)
			}
			ctx = c
		case ucxKindHdr.MatchString(t):
			kind = ucxKindHdr.FindStringSubmatch(t)[1]
		case ucxStageHdr.MatchString(t):
			if err := closeTable(); err != nil {
				return nil, err
			}
			m := ucxStageHdr.FindStringSubmatch(t)
			table = &ucxTable{final: m[1] == "Test", kind: kind, rank: ucxRank(m[2])}
			kind = ""
		case ucxCSVHeader.MatchString(t):
			if err := closeTable(); err != nil {
				return nil, err
			}
			table = &ucxTable{csv: true, rank: ucxRank(ucxCSVHeader.FindStringSubmatch(t)[1])}
		case ucxBoxLine.MatchString(t):
			m := ucxBoxLine.FindStringSubmatch(t)
			if err := ucxBox(&ctx, m[1], m[2]); err != nil {
				return nil, fail(i, "%w", err)
			}
		case strings.HasPrefix(t, "+-") || strings.HasPrefix(t, "|"):
			// the box's and the table's rules and headings
		case table != nil && strings.HasPrefix(t, "[thread"):
			// a progress report
		case table != nil && ucxResultRow(table, t) != nil:
			f := ucxResultRow(table, t)
			vals, err := ucxValues(f)
			if err != nil {
				return nil, fail(i, "%w", err)
			}
			if table.ctx == nil {
				c := ctx
				table.ctx = &c
				ctx = ucxContext{size: -1}
			}
			table.vals, table.rowLine = vals, i
			if !table.csv { // a Final: row, or -f's only row, ends its table
				if err := closeTable(); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := closeTable(); err != nil {
		return nil, err
	}
	var out []bench.Result
	for _, s := range series {
		out = append(out, ucxResults(s)...)
	}
	return out, nil
}

// ucxResultRow returns the fields of a table's result row, or nil for
// any other line (a progress row, a log line).
func ucxResultRow(table *ucxTable, t string) []string {
	switch {
	case table.csv:
		if !ucxStartsNumber(t) {
			return nil // "[thread N]" progress, or not a row
		}
		return strings.Split(t, ",")
	case strings.HasPrefix(t, "Final:"):
		return strings.Fields(strings.TrimPrefix(t, "Final:"))
	case table.final:
		f := strings.Fields(t)
		if (len(f) == 9 || len(f) == 5) && !ucxStartsNumber(f[0]) {
			f = f[1:] // with batch files the test's name opens the row
		}
		if len(f) == 0 || !ucxStartsNumber(f[0]) {
			return nil
		}
		return f
	}
	return nil
}

func ucxStartsNumber(s string) bool { return s != "" && s[0] >= '0' && s[0] <= '9' }

// ucxRank reads the percentile rank of the latency column ("" for
// "typical", the median).
func ucxRank(s string) float64 {
	if s == "" {
		return 50
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0 // an unknown rank: the column is not kept
	}
	return r
}

// ucxValues reads a result row: 8 values (iterations, percentile, average
// and overall latency, average and overall bandwidth, average and overall
// message rate) or, for a multi-threaded run's final row, 4 (iterations,
// overall latency, bandwidth, message rate). -N's thousands separators (",")
// are dropped.
func ucxValues(f []string) ([]float64, error) {
	if len(f) != 8 && len(f) != 4 {
		return nil, fmt.Errorf("result row with %d values, want 8 (or 4 for several threads): a cut-off line?", len(f))
	}
	vals := make([]float64, len(f))
	for j, s := range f {
		v, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(s), ",", ""), 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("value %d %q: not a non-negative number", j+1, s)
		}
		vals[j] = v
	}
	if len(vals) == 4 { // spread into the 8-column layout
		vals = []float64{vals[0], 0, vals[1], vals[1], vals[2], vals[2], vals[3], vals[3]}
	}
	return vals, nil
}

// ucxParseCommand reads -t, -s, -D and -x from a command line.
func ucxParseCommand(line string) (ucxContext, error) {
	c := ucxContext{size: -1}
	f := strings.Fields(line)
	for j := 0; j+1 < len(f); j++ {
		switch f[j] {
		case "-t":
			c.test = f[j+1]
		case "-s":
			n := 0
			for _, part := range strings.Split(f[j+1], ",") { // scatter-gather: the message is the sum
				v, err := strconv.Atoi(part)
				if err != nil || v < 0 {
					return c, fmt.Errorf("command line -s %q: not a size", f[j+1])
				}
				n += v
			}
			c.size, c.sizeFrom = n, "command line"
		case "-D":
			c.layout = f[j+1]
		case "-x":
			c.tl = f[j+1]
		}
	}
	return c, nil
}

// ucxBox records one line of the server's box.
func ucxBox(c *ucxContext, key, val string) error {
	switch key {
	case "API":
		switch val {
		case "protocol layer":
			c.api = "ucp"
		case "transport layer":
			c.api = "uct"
		}
	case "Test":
		c.test = val
	case "Data layout":
		if val != "(automatic)" {
			c.layout = val
		}
	case "Message size":
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return fmt.Errorf("message size %q: not a size", val)
		}
		if c.size >= 0 && c.size != n {
			return fmt.Errorf("the server's box says message size %d, the %s %d", n, c.sizeFrom, c.size)
		}
		c.size, c.sizeFrom = n, "server box"
	}
	return nil
}

// ucxAddRun files a table's result under its series.
func ucxAddRun(series *[]*ucxSeries, t *ucxTable) error {
	c := t.ctx
	if c.size < 0 {
		return errors.New("which message size? Neither the server's box (| Message size: N) nor a command line (ucx_perftest ... -s N) precedes this result: keep one of them before each run")
	}
	name, latency, known := ucxTestName(c)
	switch {
	case t.kind != "":
		latency = t.kind == "latency"
	case !known:
		return errors.New("which test? CSV output does not say: keep the command line (ucx_perftest ... -t TEST) or the server's box before each run")
	}
	label := "ucx_perftest " + name
	if c.tl != "" {
		label += " " + c.tl
	}
	if c.layout != "" {
		label += " " + c.layout
	}
	var s *ucxSeries
	for _, x := range *series {
		if x.label == label && x.latency == latency {
			s = x
		}
	}
	if s == nil {
		s = &ucxSeries{label: label, latency: latency}
		*series = append(*series, s)
	}
	for _, r := range s.runs {
		if r.size == c.size {
			return fmt.Errorf("size %d of %s measured twice: one run per size", c.size, label)
		}
	}
	s.runs = append(s.runs, ucxRun{size: c.size, rank: t.rank, vals: t.vals})
	return nil
}

// ucxTestName names the context's test, and says whether UCX calls it a
// latency test and whether the test is known at all.
func ucxTestName(c *ucxContext) (name string, latency, known bool) {
	for _, t := range ucxTests {
		if c.test == t.name || c.test == t.desc && (c.api == "" || c.api == t.api) {
			return t.name, t.latency, true
		}
	}
	if c.test != "" {
		return c.test, false, false
	}
	return "(test not named)", false, false
}

// ucxResults makes a series' Results, its points in size order.
func ucxResults(s *ucxSeries) []bench.Result {
	slices.SortFunc(s.runs, func(a, b ucxRun) int { return a.size - b.size })
	var sizes []int
	var lat, bw, mr []bench.Point
	for _, r := range s.runs {
		sizes = append(sizes, r.size)
		iters := int(r.vals[0])
		p := singleRunPoint(r.size, "us", r.vals[3])
		if r.vals[1] > 0 {
			switch r.rank {
			case 50:
				p.P50 = r.vals[1]
			case 90:
				p.P90 = r.vals[1]
			case 99:
				p.P99 = r.vals[1]
			}
		}
		b := singleRunPoint(r.size, "MB/s", r.vals[5]*ucxMiB/1e6)
		m := singleRunPoint(r.size, "msg/s", r.vals[7])
		p.Iters, b.Iters, m.Iters = iters, iters, iters
		lat, bw, mr = append(lat, p), append(bw, b), append(mr, m)
	}
	mk := func(label string, pat bench.Pattern, pts []bench.Point) bench.Result {
		return bench.Result{Label: label, Spec: bench.Spec{Transport: ucxTool, Pattern: pat, Sizes: slices.Clone(sizes), Reps: 1}, Points: pts}
	}
	if s.latency {
		return []bench.Result{mk(s.label, bench.Latency, lat)}
	}
	return []bench.Result{mk(s.label, bench.Bandwidth, bw), mk(s.label+" msgrate", bench.MsgRate, mr)}
}
