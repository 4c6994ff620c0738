package stackcheck

import (
	"bufio"
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotune/gotune/internal/launch"
)

//go:embed csrc/cvars.c
var cvarsSource []byte

// cvar is one MPI_T control variable as cvars.c lists it.
type cvar struct {
	Type  string // int, unsigned, unsigned_long, char, ...
	Value string // "" for one bound to an object or unreadable
}

// cvarList is cvars.c's output.
type cvarList struct {
	Version string // "MPICH 4.0.2"
	Vars    map[string]cvar
}

// parseCvars reads cvars.c's output: "# version ...", "# cvars N", then
// NAME<TAB>TYPE<TAB>VALUE lines; it checks that N lines came.
func parseCvars(r io.Reader) (cvarList, error) {
	l := cvarList{Vars: map[string]cvar{}}
	want := -1
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "# version "); ok {
			l.Version = strings.Join(strings.Fields(strings.Replace(v, "Version:", "", 1)), " ")
			continue
		}
		if v, ok := strings.CutPrefix(line, "# cvars "); ok {
			if _, err := fmt.Sscan(v, &want); err != nil {
				return l, fmt.Errorf("cvars line %d: %q: %w", n, line, err)
			}
			continue
		}
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			return l, fmt.Errorf("cvars line %d: %q: want NAME<TAB>TYPE<TAB>VALUE", n, line)
		}
		l.Vars[f[0]] = cvar{Type: f[1], Value: f[2]}
	}
	if err := sc.Err(); err != nil {
		return l, fmt.Errorf("cvars output: %w", err)
	}
	if want < 0 || len(l.Vars) != want {
		return l, fmt.Errorf("cvars output: %d variables listed, the library counts %d", len(l.Vars), want)
	}
	return l, nil
}

// mpichTuned are the CVARs gotune tunes (CH4 shared memory's eager
// protocol and cells, the IPC thresholds), for a check without a file;
// a row only for those the installed MPICH knows.
var mpichTuned = []string{
	"MPIR_CVAR_CH4_SHM", "MPIR_CVAR_CH4_SHM_POSIX_EAGER",
	"MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELLS", "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE",
	"MPIR_CVAR_CH4_XPMEM_ENABLE", "MPIR_CVAR_CH4_IPC_XPMEM_P2P_THRESHOLD",
	"MPIR_CVAR_CH4_IPC_CMA_ENABLE", "MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD",
	"MPIR_CVAR_CH4_IPC_GPU_P2P_THRESHOLD",
}

// buildCvars compiles cvars.c with mpicc.mpich into dir.
func buildCvars(ctx context.Context, dir string, env []string) (string, error) {
	src, bin := filepath.Join(dir, "cvars.c"), filepath.Join(dir, "cvars")
	if err := os.WriteFile(src, cvarsSource, 0o644); err != nil {
		return "", fmt.Errorf("build cvars: %w", err)
	}
	if _, err := runTool(ctx, "mpich", env, dir, "mpicc.mpich", "-std=c11", "-O2", "-Wall", "-o", bin, src); err != nil {
		return "", fmt.Errorf("build cvars: %w", err)
	}
	return bin, nil
}

// checkMPICH lists MPICH's CVARs through MPI_T with the file's lines in the
// environment (as `set -a; . mpich.env` puts them there) and without them,
// and judges.
func checkMPICH(ctx context.Context, p *Parsed, env []string) (*Report, error) {
	dir, err := launch.TempDir("check")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin, err := buildCvars(ctx, dir, env)
	if err != nil {
		return nil, err
	}
	list := func(env []string) (cvarList, error) {
		out, err := runTool(ctx, "mpich", env, dir, bin)
		if err != nil {
			return cvarList{}, fmt.Errorf("list MPICH's control variables: %w", err)
		}
		return parseCvars(strings.NewReader(out.stdout))
	}
	fileEnv, set := settingsEnv(p)
	return withAndWithout(p, env, judgeMPICH,
		func() (cvarList, error) { return list(withEnv(env, func(k string) bool { return set[k] })) },
		func() (cvarList, error) {
			with, err := list(withEnv(env, nil, fileEnv...))
			if err != nil {
				return with, fmt.Errorf("with %s: %w", p.Path, err)
			}
			return with, nil
		})
}

// judgeMPICH compares the file (nil: none) with MPICH's CVARs read with
// the file's lines in the environment (with) and without them. MPICH reads
// MPIR_CVAR_X, else MPIR_PARAM_X, else MPICH_X from the environment when
// MPI_T (or MPI) starts; a misspelt name is ignored without a word, and a
// value it cannot parse stops MPI_T_init_thread.
func judgeMPICH(p *Parsed, with, without cvarList, env map[string]string) *Report {
	r := &Report{Stack: "mpich", Version: with.Version}
	if p == nil {
		return r.builtin(mpichTuned, func(name string) (Row, bool) {
			v, ok := with.Vars[name]
			return Row{Name: name, Used: v.Value, Source: mpichSource(name, env)}, ok
		})
	}
	lost := r.load(p, "FILE's lines in the environment, as `set -a; . FILE; set +a` puts them there")
	for _, s := range p.Settings {
		row := Row{Name: s.Name, Line: s.Line, File: s.Value}
		v, known := with.Vars[s.Name]
		if !known {
			r.refuse(row, Unknown, "%s: %s: %s has no such control variable and ignores it without a word", r.at(s.Line), s.Name, with.Version)
			continue
		}
		row.Used, row.Source = v.Value, "file "+r.at(s.Line)
		row.Status = judge(s.Value, v.Value, without.Vars[s.Name].Value)
		switch {
		case lost[s.Line]:
			row.Status = Overridden
		case row.Status == NotTaken:
			r.warnf("%s: %s=%s: MPICH keeps %s", r.at(s.Line), s.Name, s.Value, v.Value)
		}
		if ev, ok := env[s.Name]; ok && ev != s.Value {
			row.Status = Differs
			r.warnf("%s: %s=%s: the environment already sets %s=%s; whichever is set last wins (sourcing FILE replaces it, a launcher's -genv beats both)", r.at(s.Line), s.Name, s.Value, s.Name, ev)
		}
		for _, alias := range mpichAliases(s.Name) {
			if ev, ok := env[alias]; ok && ev != s.Value {
				r.notef("%s: the environment sets %s=%s, another spelling of %s that MPICH reads only when %s is unset: FILE's value wins once loaded", r.at(s.Line), alias, ev, s.Name, s.Name)
			}
		}
		r.Rows = append(r.Rows, row)
	}
	return r
}

// mpichAliases are the other environment names MPICH reads for a CVAR.
func mpichAliases(name string) []string {
	rest := strings.TrimPrefix(name, "MPIR_CVAR_")
	return []string{"MPIR_PARAM_" + rest, "MPICH_" + rest}
}

// mpichSource says where a CVAR's value comes from without a file.
func mpichSource(name string, env map[string]string) string {
	for _, n := range append([]string{name}, mpichAliases(name)...) {
		if _, ok := env[n]; ok {
			return "environment " + n
		}
	}
	return "default"
}
