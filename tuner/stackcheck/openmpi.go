package stackcheck

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ompiParam is one MCA parameter as ompi_info --parsable reports it.
type ompiParam struct {
	Value  string
	Source string // "default", "environment", "command line", "file (PATH:LINE)", ...
}

// ompiInfo is ompi_info --all --parsable, the parts the check reads.
type ompiInfo struct {
	Version string               // "Open MPI 4.1.4"
	Params  map[string]ompiParam // by parameter name
}

// parseOMPIInfo reads ompi_info --all --parsable output: lines
// mca:FRAMEWORK:COMPONENT:param:NAME:FIELD:REST, of which the value and
// source fields are kept (a value may itself contain colons), and
// ompi:version:full:V.
func parseOMPIInfo(r io.Reader) (ompiInfo, error) {
	info := ompiInfo{Params: map[string]ompiParam{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "ompi:version:full:"); ok {
			info.Version = "Open MPI " + v
			continue
		}
		if !strings.HasPrefix(line, "mca:") {
			continue
		}
		f := strings.SplitN(line, ":", 7)
		if len(f) < 6 || f[3] != "param" {
			continue
		}
		if len(f) < 7 {
			if f[5] == "value" || f[5] == "source" {
				return info, fmt.Errorf("ompi_info line %d: %q: no %s after the field name", n, line, f[5])
			}
			continue
		}
		name, field, rest := f[4], f[5], f[6]
		p := info.Params[name]
		switch field {
		case "value":
			p.Value = rest
		case "source":
			p.Source = rest
		default:
			continue
		}
		info.Params[name] = p
	}
	if err := sc.Err(); err != nil {
		return info, fmt.Errorf("ompi_info output: %w", err)
	}
	if len(info.Params) == 0 {
		return info, fmt.Errorf("ompi_info output: no mca:...:param: lines")
	}
	return info, nil
}

// fileSource parses "file (PATH:LINE)".
func fileSource(src string) (path string, line int, ok bool) {
	inner, ok := strings.CutPrefix(src, "file (")
	if !ok {
		return "", 0, false
	}
	inner = strings.TrimSuffix(inner, ")")
	i := strings.LastIndexByte(inner, ':')
	if i < 0 {
		return inner, 0, true
	}
	n, err := strconv.Atoi(inner[i+1:])
	if err != nil {
		return inner, 0, true
	}
	return inner[:i], n, true
}

// openMPITuned are the parameters gotune tunes, for a check without a file:
// Open MPI 4.1's vader names and 5.x's sm names (a row only for those the
// installed Open MPI knows).
var openMPITuned = []string{
	"pml", "btl",
	"btl_vader_eager_limit", "btl_vader_rndv_eager_limit", "btl_vader_max_send_size",
	"btl_vader_single_copy_mechanism", "btl_vader_fbox_threshold", "btl_vader_fbox_max", "btl_vader_fbox_size",
	"btl_sm_eager_limit", "btl_sm_rndv_eager_limit", "btl_sm_max_send_size",
	"btl_sm_fbox_threshold", "btl_sm_fbox_max", "btl_sm_fbox_size", "smsc",
}

const ompiParamFiles = "mca_base_param_files"

// checkOpenMPI runs ompi_info with the file as Open MPI's params file
// (OMPI_MCA_mca_base_param_files=FILE in the caller's environment) and
// without it, and judges.
func checkOpenMPI(ctx context.Context, p *Parsed, env []string) (*Report, error) {
	run := func(env []string) (ompiInfo, error) {
		out, err := runTool(ctx, "openmpi", env, "", "ompi_info", "--all", "--parsable")
		if err != nil {
			return ompiInfo{}, err
		}
		info, err := parseOMPIInfo(strings.NewReader(out.stdout))
		if err != nil {
			return ompiInfo{}, fmt.Errorf("ompi_info --all --parsable: %w", err)
		}
		return info, nil
	}
	return withAndWithout(p, env, judgeOpenMPI, func() (ompiInfo, error) { return run(env) },
		func() (ompiInfo, error) {
			return run(withEnv(env, func(k string) bool {
				return k == "OMPI_MCA_"+ompiParamFiles || k == "OMPI_MCA_mca_param_files"
			}, "OMPI_MCA_"+ompiParamFiles+"="+p.Path))
		})
}

// judgeOpenMPI compares the file (nil: none) with ompi_info's account with
// the file loaded (with) and as the caller's environment stands (without).
// Open MPI's precedence, as verified with ompi_info 4.1.4: command line >
// OMPI_MCA_ environment > params files, of which the first in
// mca_base_param_files that sets a name wins and, within one file, the last
// line; an unknown name is ignored without a word.
func judgeOpenMPI(p *Parsed, with, without ompiInfo, env map[string]string) *Report {
	r := &Report{Stack: "openmpi", Version: with.Version}
	if p == nil {
		return r.builtin(openMPITuned, func(name string) (Row, bool) {
			prm, ok := with.Params[name]
			return Row{Name: name, Used: prm.Value, Source: prm.Source}, ok
		})
	}
	lost := r.load(p, "OMPI_MCA_"+ompiParamFiles+"="+p.Path+" (in place of Open MPI's list of params files)")
	for _, s := range p.Settings {
		row := Row{Name: s.Name, Line: s.Line, File: s.Value}
		prm, known := with.Params[s.Name]
		if !known {
			r.refuse(row, Unknown, "%s: %s: %s has no such parameter and ignores the line without a word", r.at(s.Line), s.Name, with.Version)
			continue
		}
		row.Used, row.Source = prm.Value, prm.Source
		path, line, isFile := fileSource(prm.Source)
		switch {
		case lost[s.Line]:
			row.Status = Overridden
		case isFile && path == p.Path && line == s.Line:
			row.Status = judge(s.Value, prm.Value, without.Params[s.Name].Value)
			if row.Status == NotTaken {
				r.warnf("%s: %s = %s: Open MPI reads the line but keeps %s (a value it cannot use)", r.at(s.Line), s.Name, s.Value, prm.Value)
			}
		case prm.Source == "environment":
			row.Status = Overridden
			by := "an OMPI_MCA_ variable of the environment (a synonym's)"
			if v, ok := env["OMPI_MCA_"+s.Name]; ok {
				by = "the environment: OMPI_MCA_" + s.Name + "=" + v
			}
			r.warnf("%s: %s = %s is overridden by %s", r.at(s.Line), s.Name, s.Value, by)
		case isFile && path != p.Path:
			row.Status = Overridden
			r.warnf("%s: %s = %s is overridden by %s:%d, which comes first in mca_base_param_files", r.at(s.Line), s.Name, s.Value, path, line)
		default:
			row.Status = Overridden
			if prm.Source == "default" {
				row.Status = NotTaken
			}
			r.warnf("%s: %s = %s: Open MPI uses %s from %s", r.at(s.Line), s.Name, s.Value, prm.Value, prm.Source)
		}
		r.Rows = append(r.Rows, row)
	}
	for _, s := range p.Settings {
		if v, ok := env["OMPI_MCA_"+s.Name]; ok && v != s.Value && with.Params[s.Name].Source != "environment" {
			r.warnf("%s: the environment sets OMPI_MCA_%s=%s, which Open MPI does not take here but would over any file", r.at(s.Line), s.Name, v)
		}
	}
	// What the usual params files set: loading FILE through the variable
	// drops them, and a file installed beside them competes name by name.
	fileNames := map[string]Setting{}
	for _, s := range p.Settings {
		fileNames[s.Name] = s
	}
	var dropped []string
	for _, name := range slices.Sorted(maps.Keys(without.Params)) {
		prm := without.Params[name]
		path, line, ok := fileSource(prm.Source)
		if !ok || path == p.Path {
			continue
		}
		dropped = append(dropped, fmt.Sprintf("%s = %s (%s:%d)", name, prm.Value, path, line))
		if s, ok := fileNames[name]; ok && s.Value != prm.Value {
			r.notef("%s: %s = %s differs from %s:%d (%s): the first file in mca_base_param_files that sets it wins, so the tuned file must come first (it does here, and as $HOME/.openmpi/mca-params.conf)",
				r.at(s.Line), name, s.Value, path, line, prm.Value)
		}
	}
	if env["OMPI_MCA_"+ompiParamFiles] != "" {
		r.notef("the environment already sets OMPI_MCA_%s=%s: the check replaced it with FILE", ompiParamFiles, env["OMPI_MCA_"+ompiParamFiles])
	}
	if len(dropped) > 0 {
		list := without.Params[ompiParamFiles].Value
		r.notef("OMPI_MCA_%s=FILE replaces Open MPI's params files (%s), so their settings no longer apply: %s; to keep them, list them after FILE (comma-separated, the first file that sets a name wins): OMPI_MCA_%s=%s,%s",
			ompiParamFiles, list, strings.Join(dropped, ", "), ompiParamFiles, p.Path, list)
	}
	return r
}

// absPath is path made absolute, as Open MPI names it in its sources.
func absPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return abs, nil
}
