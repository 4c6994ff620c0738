package importer

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/hostinfo"
)

// nccl-tests (NVIDIA/nccl-tests): the text a *_perf binary prints.
//
// A file is one run of one binary. The collective names the pattern:
// bench.Pattern("all_reduce"), "all_gather", "alltoall", "alltoallv",
// "broadcast", "reduce", "reduce_scatter", "gather", "scatter",
// "sendrecv", "hypercube": the binary's name without "_perf" (or
// "_perf_mpi"). It is read from "# Collective test starting: X_perf"
// (nccl-tests 2.17 and later), else from the first line that names a
// *_perf binary (a pasted command line), else from the file's name; a file
// with none of these is refused, since older outputs do not say which
// collective they measured.
//
// Each (type, redop, root) of the table gives six Results: out-of-place
// and in-place, each as time (µs, lower is better: the Points' Unit says
// so, whatever bench.Pattern.Unit makes of an unknown pattern), algbw and
// busbw (MB/s). nccl-tests' GB/s is 10^9 bytes/s (src/all_reduce.cu and
// the other collectives' GetBw: "(double)(count * typesize) / 1.0E9 /
// sec"), so MB/s = GB/s * 1000.
//
// #wrong is the count of elements that failed validation. A nonzero count
// is kept, not refused: the Point gets a warning and Validated=false, so
// the rest of the run (often every other size) stays comparable and the
// failure stays visible in every report of the result. "N/A" (run with
// -c 0: no check) leaves Validated false without a warning. Older versions
// print an "error" column (the largest deviation) instead; any nonzero
// value is treated the same way.
//
// A run must end with its summary ("# Avg bus bandwidth"): a table without
// one is a truncated run and is refused, as is a run that reports a CUDA
// or NCCL failure.

const ncclTool = "nccl-tests"

// ncclBytesPerGB: nccl-tests divides bytes by 1.0E9 for its GB/s.
const ncclBytesPerGB = 1e9

var (
	ncclRankLine   = regexp.MustCompile(`^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$`)
	ncclBinary     = regexp.MustCompile(`\b([a-z][a-z_]*?)_perf(?:_mpi)?\b`)
	ncclVersion    = regexp.MustCompile(`^# nccl-tests version (\S+)(?:.*nccl-library=(\d+))?`)
	ncclIters      = regexp.MustCompile(`warmup iters: (\d+) iters: (\d+)`)
	ncclValidation = regexp.MustCompile(`validation: (\d+)`)
	ncclFailure    = regexp.MustCompile(`^(?:\S+: )?Test (?:NCCL|CUDA) failure|^# error:`)
)

func init() {
	register(Parser{Tool: ncclTool, Detect: detectNCCLTests, Parse: parseNCCLTests})
}

// detectNCCLTests looks for the lines only nccl-tests prints: its
// parameter line, its version and start lines, or its table header.
func detectNCCLTests(lines []string) bool {
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "# nThread ") && strings.Contains(l, " nGpus "),
			strings.HasPrefix(l, "# nccl-tests version "),
			strings.HasPrefix(l, "# Collective test starting: "):
			return true
		}
		if f := ncclHeaderFields(l); f != nil {
			return true
		}
	}
	return false
}

// ncclHeaderFields returns the column names of a table header line
// ("#  size  count  type  redop  root  time  algbw  busbw  #wrong ..."),
// or nil for any other line.
func ncclHeaderFields(l string) []string {
	rest, ok := strings.CutPrefix(l, "#")
	if !ok {
		return nil
	}
	f := strings.Fields(rest)
	if len(f) < 8 || f[0] != "size" || f[1] != "count" || !strings.Contains(rest, "algbw") || !strings.Contains(rest, "busbw") {
		return nil
	}
	return f
}

// ncclTable is where a header puts each value of a row.
type ncclTable struct {
	root   int    // index of the root column, -1 in versions without one
	groups []int  // index of each placement's time column: out-of-place, in-place
	width  int    // columns per placement: time algbw busbw #wrong [i_min i_max i_p99 i_cv%]
	cpu    bool   // the time is CPU time (-C), not CUDA event time
	wrong  string // the validation column's name: "#wrong", or "error" in older versions
	n      int    // values a row must have (a trailing timestamp may follow)
}

func ncclParseHeader(f []string) (ncclTable, error) {
	t := ncclTable{root: -1}
	for i, c := range f {
		switch c {
		case "root":
			t.root = i
		case "time", "cputime":
			t.groups = append(t.groups, i)
			t.cpu = c == "cputime"
		}
	}
	if len(t.groups) != 2 {
		return t, fmt.Errorf("table header with %d time columns, want 2 (out-of-place, in-place)", len(t.groups))
	}
	t.width = t.groups[1] - t.groups[0]
	if t.width != 4 && t.width != 8 {
		return t, fmt.Errorf("table header with %d columns per placement, want 4 or 8", t.width)
	}
	for g := range t.groups {
		at := t.groups[g]
		if at+3 >= len(f) {
			return t, fmt.Errorf("table header ends inside a placement's columns, want time algbw busbw #wrong")
		}
		if f[at+1] != "algbw" || f[at+2] != "busbw" || (f[at+3] != "#wrong" && f[at+3] != "error") {
			return t, fmt.Errorf("table header columns %q, want time algbw busbw #wrong", f[at:at+4])
		}
		t.wrong = f[at+3]
	}
	t.n = t.groups[1] + t.width
	return t, nil
}

// ncclKey is one series of a run: -d all and -o all repeat each size per
// type and reduction.
type ncclKey struct {
	typ, redop string
	root       int
}

type ncclRow struct {
	size  int
	count int
	// per placement (out-of-place, in-place): time µs, algbw and busbw GB/s
	time, alg, bus [2]float64
	p99            [2]float64 // per-iteration p99 µs (-I 1), else 0
	wrong          [2]string  // as printed
}

func parseNCCLTests(name string, lines []string) ([]bench.Result, error) {
	fail := func(i int, format string, args ...any) error {
		return &LineError{File: name, Line: i + 1, Err: fmt.Errorf("nccl-tests: "+format, args...)}
	}
	var (
		coll, fromLine   string
		prov             hostinfo.Provenance
		iters, warmup    int
		validation       = -1
		table            *ncclTable
		keys             []ncclKey
		rows             = map[ncclKey][]ncclRow{}
		lastRow, summary = -1, false
		haveRows         bool
	)
	for i, l := range lines {
		switch {
		case ncclFailure.MatchString(strings.TrimSpace(l)):
			return nil, fail(i, "the run failed: %s", strings.TrimSpace(l))
		case strings.HasPrefix(l, "# Collective test starting: "):
			coll = ncclCollective(strings.TrimPrefix(l, "# Collective test starting: "))
		case strings.HasPrefix(l, "# nccl-tests version "):
			if m := ncclVersion.FindStringSubmatch(l); m != nil {
				ncclLib(&prov, ncclTool, m[1])
				if m[2] != "" {
					ncclLib(&prov, "nccl", ncclDecodeVersion(m[2]))
				}
			}
		case strings.HasPrefix(l, "# nThread "):
			if m := ncclIters.FindStringSubmatch(l); m != nil {
				warmup, _ = strconv.Atoi(m[1]) // \d+: only overflow fails, leaving 0 (unknown)
				iters, _ = strconv.Atoi(m[2])
			}
			if m := ncclValidation.FindStringSubmatch(l); m != nil {
				validation, _ = strconv.Atoi(m[1])
			}
		case ncclRankLine.MatchString(l):
			m := ncclRankLine.FindStringSubmatch(l)
			rank, err1 := strconv.Atoi(m[1])
			dev, err2 := strconv.Atoi(m[3])
			if err := errors.Join(err1, err2); err != nil {
				return nil, fail(i, "device line: %w", err)
			}
			if prov.Host == "" {
				prov.Host = m[2]
			}
			prov.Ranks = append(prov.Ranks, hostinfo.RankInfo{Rank: rank, Mem: "device",
				GPU: &hostinfo.GPUInfo{Ordinal: dev, Name: strings.TrimSpace(m[5]), PCIBusID: m[4]}})
		case strings.HasPrefix(l, "# Avg bus bandwidth"), strings.HasPrefix(l, "# Out of bounds values"):
			summary = true
		case ncclHeaderFields(l) != nil:
			t, err := ncclParseHeader(ncclHeaderFields(l))
			if err != nil {
				return nil, fail(i, "%w", err)
			}
			table = &t
		case strings.HasPrefix(l, "#"):
		default:
			f := strings.Fields(l)
			if len(f) == 0 || !ncclStartsNumber(f[0]) {
				if fromLine == "" { // a pasted command line, or NCCL's log naming the binary
					if m := ncclBinary.FindStringSubmatch(l); m != nil {
						fromLine = m[1]
					}
				}
				continue // NCCL INFO lines, launcher noise
			}
			if table == nil {
				return nil, fail(i, "a row before the table header")
			}
			key, row, err := ncclParseRow(*table, f)
			if err != nil {
				return nil, fail(i, "%w", err)
			}
			if _, ok := rows[key]; !ok {
				keys = append(keys, key)
			}
			for _, r := range rows[key] {
				if r.size == row.size {
					return nil, fail(i, "size %d of %s/%s appears twice: one run per file", row.size, key.typ, key.redop)
				}
			}
			rows[key] = append(rows[key], row)
			lastRow, haveRows, summary = i, true, false
		}
	}
	if !haveRows {
		return nil, nil
	}
	if !summary {
		return nil, fail(lastRow, "the run ends without its summary (# Avg bus bandwidth): truncated output")
	}
	if coll == "" {
		coll = fromLine
	}
	if coll == "" {
		if m := ncclBinary.FindStringSubmatch(filepath.Base(name)); m != nil {
			coll = m[1]
		}
	}
	if coll == "" {
		return nil, &LineError{File: name, Err: errors.New("nccl-tests: which collective? The output does not say (no \"# Collective test starting\" line): keep the command line in the file or name it after the binary, e.g. all_reduce_perf.txt")}
	}
	var out []bench.Result
	for _, k := range keys {
		out = append(out, ncclResults(coll, k, *table, rows[k], prov, iters, warmup, validation)...)
	}
	return out, nil
}

// ncclStartsNumber reports whether a row's first field is a size.
func ncclStartsNumber(s string) bool { return s[0] >= '0' && s[0] <= '9' }

func ncclParseRow(t ncclTable, f []string) (ncclKey, ncclRow, error) {
	var k ncclKey
	var r ncclRow
	if len(f) < t.n {
		return k, r, fmt.Errorf("%d fields, want %d (a cut-off line?)", len(f), t.n)
	}
	size, err := strconv.Atoi(f[0])
	if err != nil || size < 0 {
		return k, r, fmt.Errorf("size %q: not a byte count", f[0])
	}
	count, err := strconv.Atoi(f[1])
	if err != nil || count < 0 {
		return k, r, fmt.Errorf("count %q: not an element count", f[1])
	}
	r.size, r.count = size, count
	k.typ, k.redop, k.root = f[2], f[3], -1
	if t.root >= 0 {
		if k.root, err = strconv.Atoi(f[t.root]); err != nil {
			return k, r, fmt.Errorf("root %q: %w", f[t.root], err)
		}
	}
	for g, at := range t.groups {
		vals := []*float64{&r.time[g], &r.alg[g], &r.bus[g]}
		names := []string{"time", "algbw", "busbw"}
		for j, p := range vals {
			v, err := strconv.ParseFloat(f[at+j], 64)
			if err != nil || v < 0 {
				return k, r, fmt.Errorf("%s %q: not a non-negative number", names[j], f[at+j])
			}
			*p = v
		}
		r.wrong[g] = f[at+3]
		if r.wrong[g] != "N/A" {
			if v, err := strconv.ParseFloat(r.wrong[g], 64); err != nil || v < 0 {
				return k, r, fmt.Errorf("#wrong %q: not a count or N/A", r.wrong[g])
			}
		}
		if t.width == 8 { // i_min i_max i_p99 i_cv%
			v, err := strconv.ParseFloat(f[at+6], 64)
			if err != nil || v < 0 {
				return k, r, fmt.Errorf("i_p99 %q: not a non-negative number", f[at+6])
			}
			r.p99[g] = v
		}
	}
	return k, r, nil
}

// ncclResults makes a series' six Results.
func ncclResults(coll string, k ncclKey, t ncclTable, rows []ncclRow, prov hostinfo.Provenance, iters, warmup, validation int) []bench.Result {
	series := k.typ + "/" + k.redop
	if k.root >= 0 {
		series += fmt.Sprintf(" root %d", k.root)
	}
	timeName := "time"
	if t.cpu {
		timeName = "cputime"
	}
	var sizes []int
	for _, r := range rows {
		sizes = append(sizes, r.size)
	}
	var out []bench.Result
	for g, placement := range []string{"out-of-place", "in-place"} {
		for _, metric := range []string{timeName, "algbw", "busbw"} {
			res := bench.Result{
				Label:      fmt.Sprintf("nccl-tests %s %s %s %s", coll, series, placement, metric),
				Metric:     fmt.Sprintf("%s %s %s", series, placement, metric),
				Provenance: ncclCloneProv(prov),
				Spec: bench.Spec{Transport: ncclTool, Pattern: bench.Pattern(coll), Sizes: sizes,
					Reps: 1, Iters: iters, Warmup: warmup, Validate: validation == 1},
			}
			for _, r := range rows {
				var p bench.Point
				switch metric {
				case "algbw":
					p = singleRunPoint(r.size, "MB/s", r.alg[g]*ncclBytesPerGB/1e6)
				case "busbw":
					p = singleRunPoint(r.size, "MB/s", r.bus[g]*ncclBytesPerGB/1e6)
				default:
					p = singleRunPoint(r.size, "us", r.time[g])
					p.P99 = r.p99[g]
				}
				p.Iters, p.Warmup = iters, warmup
				if w := r.wrong[g]; w != "N/A" {
					if v, _ := strconv.ParseFloat(w, 64); v == 0 { // ncclParseRow checked it
						p.Validated = validation != 0
					} else {
						p.Warnings = append(p.Warnings, fmt.Sprintf("nccl-tests validation failed: %s %s", t.wrong, w))
					}
				}
				res.Points = append(res.Points, p)
			}
			out = append(out, res)
		}
	}
	return out
}

// ncclCollective turns "all_reduce_perf" (or a path to it) into
// "all_reduce".
func ncclCollective(s string) string {
	if m := ncclBinary.FindStringSubmatch(filepath.Base(strings.TrimSpace(s))); m != nil {
		return m[1]
	}
	return ""
}

// ncclDecodeVersion turns NCCL_VERSION_CODE (22703, or 2408 before 2.9)
// into "2.27.3".
func ncclDecodeVersion(code string) string {
	n, err := strconv.Atoi(code)
	if err != nil || n <= 0 {
		return code
	}
	if n < 10000 { // NCCL_VERSION(X,Y,Z) was X*1000+Y*100+Z before 2.9
		return fmt.Sprintf("%d.%d.%d", n/1000, n%1000/100, n%100)
	}
	return fmt.Sprintf("%d.%d.%d", n/10000, n%10000/100, n%100)
}

func ncclLib(p *hostinfo.Provenance, lib, v string) {
	if p.Libraries == nil {
		p.Libraries = map[string]string{}
	}
	p.Libraries[lib] = v
}

// ncclCloneProv copies the maps and slices so Results share nothing.
func ncclCloneProv(p hostinfo.Provenance) hostinfo.Provenance {
	q := p
	if p.Libraries != nil {
		q.Libraries = map[string]string{}
		for k, v := range p.Libraries {
			q.Libraries[k] = v
		}
	}
	q.Ranks = nil
	for _, r := range p.Ranks {
		if r.GPU != nil {
			g := *r.GPU
			r.GPU = &g
		}
		q.Ranks = append(q.Ranks, r)
	}
	return q
}
