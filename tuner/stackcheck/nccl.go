package stackcheck

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports/nccl"
)

// ncclLog is what NCCL's INIT and ENV log lines said in a run: its
// version, the values it read from the environment (where nccl.conf's
// lines land: NCCL exports them there), and its tuner plugin's lines.
type ncclLog struct {
	Version string
	Vars    map[string]string // NCCL_NAME -> value, as NCCL logged it
	Plugin  []string          // lines about the tuner plugin
}

var (
	ncclSetLine     = regexp.MustCompile(`NCCL INFO (NCCL_\S+) set by environment to (.*)$`)
	ncclVersionLine = regexp.MustCompile(`NCCL version (\S+)`)
	ncclPluginLine  = regexp.MustCompile(`(?i)NCCL INFO (.*tuner[ /]plugin.*)$`)
)

// parseNCCLLog reads NCCL's log lines (NCCL_DEBUG=INFO with
// NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING) of every rank. An integer value is
// logged with a full stop after it ("set by environment to 0."), which
// is dropped.
func parseNCCLLog(r io.Reader) (ncclLog, error) {
	l := ncclLog{Vars: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if m := ncclSetLine.FindStringSubmatch(line); m != nil {
			v := m[2]
			if num, ok := strings.CutSuffix(v, "."); ok {
				if _, err := strconv.ParseInt(num, 10, 64); err == nil {
					v = num
				}
			}
			l.Vars[m[1]] = v
			continue
		}
		if m := ncclVersionLine.FindStringSubmatch(line); m != nil && l.Version == "" {
			l.Version = "NCCL " + m[1]
		}
		if m := ncclPluginLine.FindStringSubmatch(line); m != nil {
			l.Plugin = append(l.Plugin, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		return l, fmt.Errorf("NCCL's log: %w", err)
	}
	if l.Version == "" {
		return l, fmt.Errorf("NCCL's log names no version (NCCL_DEBUG=INFO not honoured?)")
	}
	return l, nil
}

// ncclTuned are the variables gotune tunes, in the nccl transport's
// order: the rows of a check without a file.
var ncclTuned = []string{
	"NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS", "NCCL_MIN_P2P_NCHANNELS", "NCCL_MAX_P2P_NCHANNELS",
	"NCCL_NTHREADS",
	"NCCL_BUFFSIZE", "NCCL_P2P_NVL_CHUNKSIZE", "NCCL_P2P_LL_THRESHOLD", "NCCL_LL128_BUFFSIZE", "NCCL_TUNER_PLUGIN",
}

// runNCCL runs gotune's own benchmarks through NCCL in env (NCCL's log
// going to files under dir) and returns every rank's log. Tests replace it.
var runNCCL = func(ctx context.Context, env []string, dir string) (string, error) {
	if err := nccl.Present(nil); err != nil {
		return "", err
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find gotune itself: %w", err)
	}
	for _, args := range [][]string{
		{"bench", "-t", "nccl", "-p", "bw", "-s", "4K,1M", "--reps", "1", "--settle", "0", "-q"},
		{"bench", "-t", "nccl", "-p", "all_reduce", "--ranks", "2", "-s", "4K,1M", "--reps", "1", "--settle", "0", "-q"},
	} {
		out, err := runTool(ctx, "nccl", env, "", self, args...)
		if err != nil {
			if strings.Contains(out.stderr, "not supported") {
				return "", sys.NotSupported("nccl", "gotune bench -t nccl cannot run here", err)
			}
			return "", err
		}
	}
	logs, err := filepath.Glob(filepath.Join(dir, "nccl.*.log"))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, f := range logs {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		b.Write(data)
	}
	return b.String(), nil
}

// checkNCCL runs gotune's NCCL benchmarks (a pair of GPUs: bw, then
// all_reduce) with NCCL's log on, FILE named by NCCL_CONF_FILE as users
// load it, and judges each line by what NCCL logged it read.
func checkNCCL(ctx context.Context, p *Parsed, env []string) (*Report, error) {
	dir, err := launch.TempDir("check")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	drop := func(k string) bool {
		return k == "NCCL_CONF_FILE" || k == "NCCL_DEBUG" || k == "NCCL_DEBUG_SUBSYS" || k == "NCCL_DEBUG_FILE"
	}
	set := []string{"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING", "NCCL_DEBUG_FILE=" + filepath.Join(dir, "nccl.%h.%p.log")}
	if p != nil {
		set = append(set, "NCCL_CONF_FILE="+p.Path)
	}
	text, err := runNCCL(ctx, withEnv(env, drop, set...), dir)
	if err != nil {
		return nil, err
	}
	l, err := parseNCCLLog(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	return judgeNCCL(p, l, envMap(env)), nil
}

// judgeNCCL compares the file (nil: none) with what NCCL logged it read.
// NCCL exports nccl.conf's lines into the environment only where a
// variable is not set already, and logs each variable it reads when it
// reads it: a line it never logged was not read on the paths the run took
// (or names nothing NCCL has).
func judgeNCCL(p *Parsed, l ncclLog, env map[string]string) *Report {
	r := &Report{Stack: "nccl", Version: l.Version}
	for _, line := range l.Plugin {
		r.notef("NCCL: %s", line)
	}
	if p == nil {
		return r.builtin(ncclTuned, func(name string) (Row, bool) {
			v, read := l.Vars[name]
			row := Row{Name: name, Used: v, Source: "environment"}
			if !read {
				row.Used, row.Source = "", "NCCL's default"
			}
			return row, true
		})
	}
	r.File, r.Loaded = p.Path, "NCCL_CONF_FILE=FILE in the environment of gotune's NCCL ranks (bw, then all_reduce, on two GPUs)"
	lost := duplicates(r, p.Settings, false) // NCCL exports a line only where the variable is unset: the first wins
	for _, s := range p.Settings {
		row := Row{Name: s.Name, Line: s.Line, File: s.Value}
		if strings.TrimSpace(s.Name) != s.Name {
			r.refuse(row, NotTaken, "%s: %q=%q: NCCL trims nothing, so this line sets a variable whose name has a blank in it", r.at(s.Line), s.Name, s.Value)
			continue
		}
		used, read := l.Vars[s.Name]
		if raw := strings.TrimRight(s.Value, "\r"); read && raw != s.Value && used == raw {
			r.notef("%s: %s: NCCL %s dropped the line's CR", r.at(s.Line), s.Name, strings.TrimPrefix(l.Version, "NCCL "))
			s.Value = raw
		}
		ev, inEnv := env[s.Name]
		switch {
		case inEnv && ev != s.Value:
			row.Used, row.Source = used, "environment"
			r.refuse(row, Overridden, "%s: %s=%s: the environment sets %s=%s, which NCCL takes before its config files", r.at(s.Line), s.Name, s.Value, s.Name, ev)
		case !read:
			r.refuse(row, Unknown, "%s: %s: NCCL %s did not read it in a bw and all_reduce run between two GPUs (no such variable, or read only on paths the run did not take)", r.at(s.Line), s.Name, strings.TrimPrefix(l.Version, "NCCL "))
		case lost[s.Line]:
			row.Used, row.Source = used, "file (an earlier line)"
			row.Status = Overridden
			r.Rows = append(r.Rows, row)
		default:
			row.Used, row.Source = used, "file "+r.at(s.Line)
			if inEnv {
				row.Source = "environment (the same value)"
			}
			if s.Value != used { // NCCL compares nothing loosely: a blank or a CR stays in the value
				r.refuse(row, NotTaken, "%s: %s=%q: NCCL read %q", r.at(s.Line), s.Name, s.Value, used)
				continue
			}
			row.Status = OK
			r.Rows = append(r.Rows, row)
		}
	}
	return r
}
