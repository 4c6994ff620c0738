package stackcheck

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// stackInfo is what the check knows about one stack's native file.
type stackInfo struct {
	name     string
	file     string // the native file's name as gotune renders it
	prefix   string // names the stack reads ("" for openmpi: any MCA name)
	sections bool   // [section] headers allowed
	lineForm string // the line form, for parse errors
	verbatim bool   // the stack takes a line as written: nothing trimmed or unquoted (NCCL)
}

var stacks = []stackInfo{
	{name: "openmpi", file: "openmpi-mca-params.conf", lineForm: "name = value"},
	{name: "mpich", file: "mpich.env", prefix: "MPIR_CVAR_", lineForm: "MPIR_CVAR_NAME=value"},
	{name: "ucx", file: "ucx.conf", prefix: "UCX_", sections: true, lineForm: "UCX_NAME=value or [section]"},
	{name: "mimalloc", file: "mimalloc.env", prefix: "MIMALLOC_", lineForm: "MIMALLOC_NAME=value"},
	{name: "nccl", file: "nccl.conf", prefix: "NCCL_", lineForm: "NCCL_NAME=value", verbatim: true},
}

// Stacks returns the names gotune check accepts.
func Stacks() []string {
	var out []string
	for _, s := range stacks {
		out = append(out, s.name)
	}
	return out
}

func lookup(stack string) (stackInfo, error) {
	for _, s := range stacks {
		if s.name == stack {
			return s, nil
		}
	}
	return stackInfo{}, fmt.Errorf("unknown stack %q: want one of %s", stack, strings.Join(Stacks(), ", "))
}

// Status says how a value of the file fared.
type Status string

const (
	OK         Status = "ok"         // the stack uses the file's value
	ReadsAs    Status = "reads as"   // taken, but the stack spells it otherwise (binomial -> 1, 16k -> 16K)
	Overridden Status = "overridden" // something of higher precedence wins
	NotTaken   Status = "not taken"  // the stack kept another value (a value it could not use)
	Unknown    Status = "unknown"    // the stack has no such parameter and ignores it
	Differs    Status = "differs"    // the environment or another file sets another value that loses here
	Effective  Status = ""           // no file: the value in use
)

// Row is one parameter: the file's value (if a file was checked) beside the
// value the stack will use and where that comes from.
type Row struct {
	Name   string
	Line   int    // line in the file, 0 without one
	File   string // value in the file
	Used   string // value the stack uses ("" when unknown)
	Source string // where Used comes from, in the stack's words where it has them
	Status Status
}

// Report is the outcome of a check.
type Report struct {
	Stack    string
	Version  string // the stack's version as it reports it
	File     string // the checked file, "" for the built-in list
	Loaded   string // how the file was loaded, in one line
	Rows     []Row
	Warnings []string // a value of the file overridden, unknown, not taken or shadowed: exit status 1
	Notes    []string // what a user should know but that does not change a value of the file
}

// Problems reports whether the check found a value of the file that the
// stack will not use as written.
func (r *Report) Problems() bool { return len(r.Warnings) > 0 }

// warnf adds a warning.
func (r *Report) warnf(format string, args ...any) {
	r.Warnings = append(r.Warnings, fmt.Sprintf(format, args...))
}

// notef adds a note.
func (r *Report) notef(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// builtin fills r, the report of a check without a file, with a row for
// each tuned name that row knows, in tuned's order.
func (r *Report) builtin(tuned []string, row func(name string) (Row, bool)) *Report {
	for _, name := range tuned {
		if rw, ok := row(name); ok {
			r.Rows = append(r.Rows, rw)
		}
	}
	return r
}

// load records that p is checked as loaded says, and returns the lines
// that a later line of the same name overrides.
func (r *Report) load(p *Parsed, loaded string) (lost map[int]bool) {
	r.File, r.Loaded = p.Path, loaded
	return duplicates(r, p.Settings, true)
}

// refuse adds row with status, and a warning saying why.
func (r *Report) refuse(row Row, status Status, format string, args ...any) {
	row.Status = status
	r.Rows = append(r.Rows, row)
	r.warnf(format, args...)
}

// at names a line of the checked file, as an error would.
func (r *Report) at(line int) string { return r.File + ":" + strconv.Itoa(line) }

// Write prints the report: a title, the table, then warnings and notes, and
// a last line saying whether the file stands.
func (r *Report) Write(w io.Writer) error {
	var b bytes.Buffer // writes to it cannot fail: one error to check, at the end
	title := "gotune check --stack " + r.Stack
	if r.Version != "" {
		title += " (" + r.Version + ")"
	}
	fmt.Fprintf(&b, "%s\n", title)
	if r.File != "" {
		fmt.Fprintf(&b, "file: %s\n", r.File)
		fmt.Fprintf(&b, "loaded: %s\n", r.Loaded)
	} else {
		fmt.Fprintf(&b, "no file: the values in use for the parameters gotune tunes\n")
	}
	t := tablewriter.NewTable(&b, tablewriter.WithHeaderAutoFormat(tw.Off))
	if r.File != "" {
		t.Header("Parameter", "Line", "In file", "Used", "From", "Status")
	} else {
		t.Header("Parameter", "Used", "From")
	}
	for _, row := range r.Rows {
		var err error
		if r.File != "" {
			err = t.Append(row.Name, strconv.Itoa(row.Line), orDash(row.File), orDash(row.Used), orDash(row.Source), string(row.Status))
		} else {
			err = t.Append(row.Name, orDash(row.Used), orDash(row.Source))
		}
		if err != nil {
			return fmt.Errorf("check table: %w", err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("check table: %w", err)
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", s)
	}
	for _, s := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", s)
	}
	switch {
	case r.File == "":
	case r.Problems():
		fmt.Fprintf(&b, "%d warning(s): %s will not use every value of %s as written\n", len(r.Warnings), r.Stack, r.File)
	default:
		fmt.Fprintf(&b, "ok: %s uses every value of %s\n", r.Stack, r.File)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// judge says whether the stack took a file's value: used is what it uses
// with the file, without what it uses with the file's names left out.
// Equal spellings (case aside) are OK; a value other than without is the
// file's, spelled by the stack (ReadsAs); otherwise the stack kept its
// value (NotTaken). Without the file's value present, a file setting the
// value the stack already had is OK.
func judge(file, used, without string) Status {
	switch {
	case strings.EqualFold(strings.TrimSpace(file), strings.TrimSpace(used)):
		return OK
	case used != without:
		return ReadsAs
	default:
		return NotTaken
	}
}

// duplicates flags a name the file sets twice: the line that loses is
// overridden by the file itself. later says whether the later line wins.
func duplicates(r *Report, settings []Setting, laterWins bool) map[int]bool {
	lost := map[int]bool{}
	seen := map[string]Setting{}
	for _, s := range settings {
		prev, ok := seen[s.Name]
		if !ok {
			seen[s.Name] = s
			continue
		}
		winner, loser := s, prev
		if !laterWins {
			winner, loser = prev, s
		}
		lost[loser.Line] = true
		r.warnf("%s: %s=%s is overridden by line %d of the same file (%s=%s)", r.at(loser.Line), loser.Name, loser.Value, winner.Line, winner.Name, winner.Value)
		seen[s.Name] = winner
	}
	return lost
}

// withAndWithout lists the stack's values without the file, then with it,
// and judges; without a file (p nil) the one listing serves as both.
func withAndWithout[L any](p *Parsed, env []string, judge func(p *Parsed, with, without L, env map[string]string) *Report, without, with func() (L, error)) (*Report, error) {
	wo, err := without()
	if err != nil {
		return nil, err
	}
	if p == nil {
		return judge(nil, wo, wo, envMap(env)), nil
	}
	w, err := with()
	if err != nil {
		return nil, err
	}
	return judge(p, w, wo, envMap(env)), nil
}

// settingsEnv is p's lines as environment entries, and the set of their
// names (none without a file).
func settingsEnv(p *Parsed) (fileEnv []string, names map[string]bool) {
	names = map[string]bool{}
	if p != nil {
		for _, s := range p.Settings {
			fileEnv = append(fileEnv, s.Name+"="+s.Value)
			names[s.Name] = true
		}
	}
	return fileEnv, names
}
