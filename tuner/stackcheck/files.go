package stackcheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
)

// Setting is one assignment of a tuned file.
type Setting struct {
	Name    string
	Value   string
	Line    int    // 1-based line in the file
	Section string // the [section] it sits under (ucx.conf), "" outside any
}

// Parsed is a tuned file as read: its settings in file order, and the lines
// that are not settings of the stack, which the check reports.
type Parsed struct {
	Path     string
	Settings []Setting
	Sections []Setting // [section] headers: Name is the section, Value ""
	Foreign  []Setting // assignments of names outside the stack's prefix
}

// ParseFile reads path in the format of stack's native file.
func ParseFile(stack, path string) (Parsed, error) {
	f, err := os.Open(path)
	if err != nil {
		return Parsed{}, err
	}
	defer f.Close()
	return Parse(stack, path, f)
}

// Parse reads r, named path in errors, in the format of stack's native file:
// openmpi `name = value` (Open MPI's own rules: `#` starts a comment, also
// after a value); mpich `MPIR_CVAR_NAME=value`, mimalloc `MIMALLOC_NAME=value`
// and ucx `UCX_NAME=value`, each optionally prefixed by `export ` and with one
// pair of matching quotes stripped as a shell sourcing the file would (ucx
// also takes `[section]` headers); nccl `NCCL_NAME=value` as NCCL reads it,
// split at the first '=' with nothing trimmed. Blank lines and lines starting with `#`
// are skipped. A line that is no assignment is an error naming path and line.
func Parse(stack, path string, r io.Reader) (Parsed, error) {
	st, err := lookup(stack)
	if err != nil {
		return Parsed{}, err
	}
	p := Parsed{Path: path}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	if st.verbatim {
		sc.Split(splitLF) // a CR stays in the line, as it does for NCCL
	}
	section := ""
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if st.sections && strings.HasPrefix(line, "[") {
			if !strings.HasSuffix(line, "]") {
				return Parsed{}, fmt.Errorf("%s:%d: %q: want a [section] header", path, n, line)
			}
			section = strings.TrimSpace(line[1 : len(line)-1])
			p.Sections = append(p.Sections, Setting{Name: section, Line: n})
			continue
		}
		name, value, ok := st.assignment(line, sc.Text())
		if !ok {
			return Parsed{}, fmt.Errorf("%s:%d: %q: want %s", path, n, sc.Text(), st.lineForm)
		}
		s := Setting{Name: name, Value: value, Line: n, Section: section}
		if st.prefix != "" && !strings.HasPrefix(strings.TrimSpace(name), st.prefix) {
			p.Foreign = append(p.Foreign, s)
			continue
		}
		p.Settings = append(p.Settings, s)
	}
	if err := sc.Err(); err != nil {
		return Parsed{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// assignment splits a setting's line as the stack reads it (line trimmed,
// raw as written); ok is false where the line is no assignment.
func (st stackInfo) assignment(line, raw string) (name, value string, ok bool) {
	switch {
	case st.verbatim:
		// As NCCL reads it: split at the first '=', nothing trimmed, so
		// that the check can say what a blank or a CR does.
		name, value, ok = strings.Cut(raw, "=")
		return name, value, ok && strings.TrimSpace(name) != ""
	case st.name == "openmpi":
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		name, value, ok = strings.Cut(line, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	default:
		name, value, ok = strings.Cut(strings.TrimPrefix(line, "export "), "=")
		name, value = strings.TrimSpace(name), unquote(strings.TrimSpace(value))
	}
	return name, value, ok && name != "" && !strings.ContainsAny(name, " \t")
}

// splitLF splits lines at LF alone, keeping a CR before it.
func splitLF(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// unquote strips one pair of matching single or double quotes.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// envMap turns os.Environ-style entries into a map; a later entry wins, as
// it does for getenv.
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// withEnv returns env without the names in drop, followed by set.
func withEnv(env []string, drop func(name string) bool, set ...string) []string {
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if drop == nil || !drop(k) {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}
