package stackcheck

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/gotune/gotune/internal/launch"
)

// ucxConfig is ucx_info -v -c -a: the version and every configuration
// variable with the value UCX uses.
type ucxConfig struct {
	Version string // "UCX 1.13.1"
	Vars    map[string]string
	Errors  []string // UCX's ERROR lines (an invalid value), from stderr
}

var ucxLogLine = regexp.MustCompile(`UCX\s+(ERROR|WARN)\s+(.*)$`)

// parseUCXInfo reads ucx_info -v -c -a's stdout ("# Version V" and
// UCX_NAME=value lines) and collects UCX's ERROR lines from log (where
// ucx_info writes them: its stdout).
func parseUCXInfo(stdout, log io.Reader) (ucxConfig, error) {
	c := ucxConfig{Vars: map[string]string{}}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "# Version "); ok {
			c.Version = "UCX " + strings.TrimSpace(v)
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "UCX_") {
			c.Vars[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("ucx_info output: %w", err)
	}
	if len(c.Vars) == 0 {
		return c, fmt.Errorf("ucx_info output: no UCX_ variables")
	}
	if log != nil {
		sc = bufio.NewScanner(log)
		for sc.Scan() {
			if m := ucxLogLine.FindStringSubmatch(sc.Text()); m != nil && m[1] == "ERROR" {
				c.Errors = append(c.Errors, m[2])
			}
		}
	}
	return c, nil
}

var ucxUnused = regexp.MustCompile(`unused env variable: (UCX_\w+)`)

// parseUCXUnused returns the names UCX warns are unused (unknown) when a
// context starts: "UCX  WARN  unused env variable: UCX_FOOBAR (...)".
func parseUCXUnused(stderr string) map[string]bool {
	out := map[string]bool{}
	for _, m := range ucxUnused.FindAllStringSubmatch(stderr, -1) {
		out[m[1]] = true
	}
	return out
}

// ucxTuned are the variables gotune tunes, for a check without a file.
var ucxTuned = []string{
	"UCX_TLS", "UCX_RNDV_THRESH", "UCX_ZCOPY_THRESH", "UCX_BCOPY_THRESH", "UCX_RNDV_SCHEME",
	"UCX_POSIX_FIFO_SIZE", "UCX_SYSV_FIFO_SIZE", "UCX_POSIX_SEG_SIZE", "UCX_CMA_SEG_SIZE",
}

// ucxConfigFiles are the files UCX 1.13 reads, in order, a later one
// overriding an earlier (strace of ucx_info -c): /etc/ucx/ucx.conf, the
// library's ../etc/ucx.conf (not checked here), $HOME/ucx.conf,
// $UCX_CONFIG_DIR/ucx.conf, ./ucx.conf; the environment overrides them all.
func ucxConfigFiles(env map[string]string, cwd string) []string {
	files := []string{"/etc/ucx/ucx.conf"}
	if home := env["HOME"]; home != "" {
		files = append(files, filepath.Join(home, "ucx.conf"))
	}
	if dir := env["UCX_CONFIG_DIR"]; dir != "" {
		files = append(files, filepath.Join(dir, "ucx.conf"))
	}
	if cwd != "" {
		files = append(files, filepath.Join(cwd, "ucx.conf"))
	}
	return files
}

// checkUCX runs ucx_info -v -c -a in a fresh directory holding the file as
// ./ucx.conf (the config file UCX 1.13 reads last) and in an empty one, and
// ucx_info -e -u t with the file's lines in the environment, for UCX's own
// word on names it does not know; then judges.
func checkUCX(ctx context.Context, p *Parsed, env []string) (*Report, error) {
	dir, err := launch.TempDir("check")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	empty, with := filepath.Join(dir, "empty"), filepath.Join(dir, "with")
	for _, d := range []string{empty, with} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	info := func(dir string) (ucxConfig, error) {
		out, err := runTool(ctx, "ucx", env, dir, "ucx_info", "-v", "-c", "-a")
		if err != nil {
			return ucxConfig{}, err
		}
		// ucx_info logs to stdout; stderr is read too, for other builds.
		return parseUCXInfo(strings.NewReader(out.stdout), strings.NewReader(out.stdout+out.stderr))
	}
	cwd, _ := os.Getwd()
	if p == nil {
		// The caller's directory: its ./ucx.conf counts.
		c, err := info(cwd)
		if err != nil {
			return nil, err
		}
		return judgeUCX(nil, c, c, nil, envMap(env), nil), nil
	}
	b, err := os.ReadFile(p.Path)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(with, "ucx.conf"), b, 0o644); err != nil {
		return nil, err
	}
	withC, err := info(with)
	if err != nil {
		return nil, fmt.Errorf("with %s as ./ucx.conf: %w", p.Path, err)
	}
	withoutC, err := info(empty)
	if err != nil {
		return nil, err
	}
	var fileEnv []string
	for _, s := range p.Settings {
		fileEnv = append(fileEnv, s.Name+"="+s.Value)
	}
	var unused map[string]bool
	out, ctxErr := runTool(ctx, "ucx", withEnv(env, nil, append(fileEnv, "UCX_WARN_UNUSED_ENV_VARS=y")...), empty, "ucx_info", "-e", "-u", "t")
	if ctxErr == nil {
		unused = parseUCXUnused(out.stdout + out.stderr) // ucx_info logs to stdout
	}
	others := map[string]Parsed{}
	for _, f := range ucxConfigFiles(envMap(env), cwd) {
		if f == p.Path {
			continue
		}
		if o, err := ParseFile("ucx", f); err == nil {
			others[f] = o
		}
	}
	r := judgeUCX(p, withC, withoutC, unused, envMap(env), others)
	if ctxErr != nil {
		r.notef("ucx_info -e -u t failed, so UCX's own word on unknown names is missing: %v", ctxErr)
	}
	return r, nil
}

// judgeUCX compares the file (nil: none) with UCX's configuration read
// with the file as ./ucx.conf (with) and without it. unused holds the names
// UCX called unused with the file's lines in the environment (nil: not
// asked; then a name ucx_info -c -a does not list is unknown). others are
// UCX's other config files that exist. UCX 1.13's precedence, verified with
// ucx_info -c: environment > ./ucx.conf > $HOME/ucx.conf > /etc/ucx/ucx.conf;
// a [section] header scopes nothing (the lines under it apply everywhere,
// a later line winning); an unknown name in a config file is ignored
// without a word, in the environment UCX warns when a context starts.
func judgeUCX(p *Parsed, with, without ucxConfig, unused map[string]bool, env map[string]string, others map[string]Parsed) *Report {
	r := &Report{Stack: "ucx", Version: with.Version}
	if p == nil {
		return r.builtin(ucxTuned, func(name string) (Row, bool) {
			v, ok := with.Vars[name]
			row := Row{Name: name, Used: v, Source: "default or a config file"}
			if hasKey(env, name) {
				row.Source = "environment"
			}
			return row, ok
		})
	}
	lost := r.load(p, "as ./ucx.conf, the config file UCX reads last")
	rejected, unmatched := ucxRejected(p.Settings, with.Errors)
	for _, s := range p.Settings {
		row := Row{Name: s.Name, Line: s.Line, File: s.Value}
		if msg, ok := rejected[s.Line]; ok {
			// ucx_info stops listing the table at the value it rejects.
			r.refuse(row, NotTaken, "%s: %s=%s: UCX rejects the value: %s", r.at(s.Line), s.Name, s.Value, msg)
			continue
		}
		used, listed := ucxValue(with.Vars, s.Name)
		known := listed
		if unused != nil {
			known = !unused[s.Name]
		}
		if !known {
			r.refuse(row, Unknown, "%s: %s: %s has no such variable and ignores it without a word in a config file (in the environment it warns: unused env variable)", r.at(s.Line), s.Name, with.Version)
			continue
		}
		row.Used, row.Source = used, "file "+r.at(s.Line)
		before, _ := ucxValue(without.Vars, s.Name)
		row.Status = judge(s.Value, used, before)
		switch {
		case lost[s.Line]:
			row.Status = Overridden
		case hasKey(env, s.Name):
			row.Status, row.Source = Overridden, "environment"
			r.warnf("%s: %s=%s is overridden by the environment: %s=%s", r.at(s.Line), s.Name, s.Value, s.Name, env[s.Name])
		case row.Status == NotTaken:
			r.warnf("%s: %s=%s: UCX keeps %s", r.at(s.Line), s.Name, s.Value, used)
		}
		for _, f := range slices.Sorted(maps.Keys(others)) {
			for _, o := range others[f].Settings {
				if o.Name == s.Name && !strings.EqualFold(o.Value, s.Value) {
					r.notef("%s: %s=%s differs from %s:%d (%s): of UCX's config files the one read last wins (/etc/ucx/ucx.conf, $HOME/ucx.conf, $UCX_CONFIG_DIR/ucx.conf, ./ucx.conf)", r.at(s.Line), s.Name, s.Value, f, o.Line, o.Value)
				}
			}
		}
		r.Rows = append(r.Rows, row)
	}
	for _, e := range unmatched {
		r.warnf("%s: UCX: %s", p.Path, e)
	}
	for _, sec := range p.Sections {
		r.notef("%s: [%s]: %s scopes nothing by section: the lines under it apply on every host", r.at(sec.Line), sec.Name, with.Version)
	}
	return r
}

var ucxInvalid = regexp.MustCompile(`Invalid value for (\w+):`)

// ucxRejected matches UCX's "Invalid value for NAME: ..." errors (NAME
// without UCX_ and the transport's prefix) to the file's lines, the last
// line whose name ends in NAME; unmatched errors are returned as they are.
func ucxRejected(settings []Setting, errs []string) (map[int]string, []string) {
	rejected := map[int]string{}
	var unmatched []string
	for _, e := range errs {
		m := ucxInvalid.FindStringSubmatch(e)
		line := 0
		for _, s := range settings {
			if m != nil && (s.Name == "UCX_"+m[1] || strings.HasSuffix(s.Name, "_"+m[1])) {
				line = s.Line
			}
		}
		if line == 0 {
			unmatched = append(unmatched, e)
			continue
		}
		rejected[line] = e
	}
	return rejected, unmatched
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// ucxValue finds a variable in ucx_info's listing; UCX_MM_X, a prefix the
// shared-memory transports inherit, reads as UCX_POSIX_X (UCX_MM_FIFO_SIZE
// sets UCX_POSIX_FIFO_SIZE and UCX_SYSV_FIFO_SIZE).
func ucxValue(vars map[string]string, name string) (string, bool) {
	if v, ok := vars[name]; ok {
		return v, true
	}
	if rest, ok := strings.CutPrefix(name, "UCX_MM_"); ok {
		v, ok := vars["UCX_POSIX_"+rest]
		return v, ok
	}
	return "", false
}
