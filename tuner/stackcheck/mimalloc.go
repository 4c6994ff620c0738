package stackcheck

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strings"

	"github.com/gotune/gotune/internal/sys"
)

// mimallocLib is the library users preload; ld.so finds it by this name.
const mimallocLib = "libmimalloc.so.2"

// mimallocOptions is what mimalloc printed at start with MIMALLOC_VERBOSE=1.
type mimallocOptions struct {
	Options    map[string]string // option name (decommit_delay) -> value
	Deprecated map[string]string // deprecated name -> the name it sets, both as MIMALLOC_ variables
	Warnings   []string          // mimalloc's other warnings
}

var (
	mimallocOption     = regexp.MustCompile(`^mimalloc: option '(\w+)': (.*)$`)
	mimallocDeprecated = regexp.MustCompile(`environment option "(\w+)" is deprecated -- use "(\w+)" instead`)
)

// parseMimalloc reads the lines mimalloc 2.0 writes at start with
// MIMALLOC_VERBOSE=1 ("mimalloc: option 'NAME': VALUE", "mimalloc:
// warning: ...").
func parseMimalloc(r io.Reader) (mimallocOptions, error) {
	m := mimallocOptions{Options: map[string]string{}, Deprecated: map[string]string{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if o := mimallocOption.FindStringSubmatch(line); o != nil {
			m.Options[o[1]] = strings.TrimSpace(o[2])
			continue
		}
		if w, ok := strings.CutPrefix(line, "mimalloc: warning: "); ok {
			if d := mimallocDeprecated.FindStringSubmatch(w); d != nil {
				m.Deprecated[strings.ToUpper(d[1])] = strings.ToUpper(d[2])
				continue
			}
			m.Warnings = append(m.Warnings, w)
		}
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("mimalloc output: %w", err)
	}
	if len(m.Options) == 0 {
		return m, fmt.Errorf("mimalloc printed no options (is %s preloaded, and 2.0's MIMALLOC_VERBOSE honoured?)", mimallocLib)
	}
	return m, nil
}

// mimallocTuned are the options gotune tunes (purge or decommit delay and
// mode, reset), 2.0's and 2.1's names; a row only for those the library has.
var mimallocTuned = []string{
	"purge_delay", "purge_decommits", "decommit_delay", "allow_decommit", "page_reset",
	"segment_decommit_delay", "decommit_extend_delay", "eager_commit",
}

// optionName turns MIMALLOC_DECOMMIT_DELAY into decommit_delay.
func optionName(v string) string { return strings.ToLower(strings.TrimPrefix(v, "MIMALLOC_")) }

// checkMimalloc starts a trivial process (true) with mimalloc preloaded and
// MIMALLOC_VERBOSE=1, so the library prints the options it took, with the
// file's lines in the environment and without them, and judges.
func checkMimalloc(ctx context.Context, p *Parsed, env []string) (*Report, error) {
	trueBin, err := exec.LookPath("true")
	if err != nil {
		return nil, err
	}
	fileEnv, set := settingsEnv(p)
	run := func(base []string, extra ...string) (mimallocOptions, error) {
		e := withEnv(base, func(k string) bool { return k == "LD_PRELOAD" || k == "MIMALLOC_VERBOSE" },
			append([]string{"LD_PRELOAD=" + mimallocLib, "MIMALLOC_VERBOSE=1"}, extra...)...)
		out, err := runTool(ctx, "mimalloc", e, "", trueBin)
		if err != nil {
			return mimallocOptions{}, err
		}
		if strings.Contains(out.stderr, "cannot be preloaded") {
			return mimallocOptions{}, sys.NotSupported("mimalloc", mimallocLib+" cannot be preloaded", errors.New(strings.TrimSpace(out.stderr)))
		}
		return parseMimalloc(strings.NewReader(out.stderr))
	}
	// Without the file: the caller's own MIMALLOC_ variables but the
	// file's names stay.
	return withAndWithout(p, env, judgeMimalloc,
		func() (mimallocOptions, error) { return run(withEnv(env, func(k string) bool { return set[k] })) },
		func() (mimallocOptions, error) { return mimallocWith(p, env, set, fileEnv, run) })
}

// mimallocWith is what mimalloc takes with the file's lines (fileEnv, of
// the names in set) added to env, run listing it.
func mimallocWith(p *Parsed, env []string, set map[string]bool, fileEnv []string, run func([]string, ...string) (mimallocOptions, error)) (mimallocOptions, error) {
	with, err := run(env, fileEnv...)
	if err != nil {
		return with, fmt.Errorf("with %s: %w", p.Path, err)
	}
	// mimalloc reads a deprecated name, and warns, only when the new one is
	// unset: ask again with just the names it did not take.
	var probe []string
	for _, s := range p.Settings {
		if _, ok := with.Options[optionName(s.Name)]; !ok && with.Deprecated[s.Name] == "" {
			probe = append(probe, s.Name+"="+s.Value)
		}
	}
	if len(probe) > 0 {
		alone, err := run(withEnv(env, func(k string) bool { return set[k] }), probe...)
		if err != nil {
			return with, fmt.Errorf("with %s's unknown names alone: %w", p.Path, err)
		}
		for old, to := range alone.Deprecated {
			with.Deprecated[old] = to
		}
	}
	return with, nil
}

// judgeMimalloc compares the file (nil: none) with the options mimalloc
// printed with the file's lines in the environment (with) and without them.
// mimalloc 2.0 reads MIMALLOC_ variables once, when the library loads; an
// unknown name (2.1's MIMALLOC_PURGE_DELAY on 2.0.9) is ignored without a
// word, a deprecated one is taken with a warning.
func judgeMimalloc(p *Parsed, with, without mimallocOptions, env map[string]string) *Report {
	r := &Report{Stack: "mimalloc", Version: mimallocLib}
	if p == nil {
		return r.builtin(mimallocTuned, func(name string) (Row, bool) {
			v, ok := with.Options[name]
			row := Row{Name: "MIMALLOC_" + strings.ToUpper(name), Used: v, Source: "default"}
			if hasKey(env, row.Name) {
				row.Source = "environment"
			}
			return row, ok
		})
	}
	lost := r.load(p, "FILE's lines in the environment of a process that preloads "+mimallocLib)
	for _, s := range p.Settings {
		row := Row{Name: s.Name, Line: s.Line, File: s.Value}
		opt := optionName(s.Name)
		if to, ok := with.Deprecated[s.Name]; ok {
			opt = optionName(to)
			if i := slices.IndexFunc(p.Settings, func(o Setting) bool { return o.Name == to }); i >= 0 {
				row.Used, row.Source = with.Options[opt], "file "+r.at(p.Settings[i].Line)
				r.refuse(row, Overridden, "%s: %s is a deprecated name of %s, which line %d sets: mimalloc reads the deprecated one only when the new one is unset", r.at(s.Line), s.Name, to, p.Settings[i].Line)
				continue
			}
			r.notef("%s: %s is deprecated: mimalloc takes it as %s", r.at(s.Line), s.Name, to)
		}
		v, known := with.Options[opt]
		if !known {
			r.refuse(row, Unknown, "%s: %s: %s has no option %s and ignores the variable without a word", r.at(s.Line), s.Name, mimallocLib, opt)
			continue
		}
		row.Used, row.Source = v, "file "+r.at(s.Line)
		row.Status = judge(s.Value, v, without.Options[opt])
		switch {
		case lost[s.Line]:
			row.Status = Overridden
		case row.Status == NotTaken:
			r.warnf("%s: %s=%s: mimalloc keeps %s", r.at(s.Line), s.Name, s.Value, v)
		}
		if ev, ok := env[s.Name]; ok && ev != s.Value {
			row.Status = Differs
			r.warnf("%s: %s=%s: the environment already sets %s=%s; whichever is set last wins (sourcing FILE replaces it)", r.at(s.Line), s.Name, s.Value, s.Name, ev)
		}
		r.Rows = append(r.Rows, row)
	}
	for _, w := range with.Warnings {
		r.notef("mimalloc: %s", w)
	}
	if !strings.Contains(env["LD_PRELOAD"], "libmimalloc") {
		r.notef("LD_PRELOAD does not name libmimalloc here: the variables act only in processes that load it (LD_PRELOAD=%s, or linked)", mimallocLib)
	}
	return r
}
