package native

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/gotune/gotune/profile"
)

// Stacks are the stacks Render writes a file for: the five a profile holds
// decisions for, and mvapich2, derived from openmpi and mpich.
var Stacks = []string{"openmpi", "mpich", "ucx", "mimalloc", "nccl", "mvapich2"}

// width is where comment lines wrap: well inside UCX 1.13's 200-byte line
// buffer, and readable.
const width = 100

// FileName is the name of the file Render writes for stack.
func FileName(stack string) (string, error) {
	if s, ok := specs[stack]; ok {
		return s.file, nil
	}
	if stack == "mvapich2" {
		return "mvapich2.conf", nil
	}
	return "", unknownStack(stack)
}

// Available lists the stacks p has a file for, in the order of Stacks: the
// stacks it holds decisions for, and mvapich2 where it holds openmpi's or
// mpich's.
func Available(p *profile.Profile) []string {
	var out []string
	for _, s := range Stacks {
		_, has := p.Stacks[s]
		if has || s == "mvapich2" && derivable(p) {
			out = append(out, s)
		}
	}
	return out
}

// Render is the config file of stack for the decisions p holds. It fails for
// a stack it does not know, a profile without that stack's decisions (for
// mvapich2: without openmpi's and mpich's), a profile that does not
// validate, and a value the stack's file format cannot carry.
func Render(stack string, p *profile.Profile) ([]byte, error) {
	if stack == "mvapich2" {
		if !derivable(p) {
			return nil, fmt.Errorf("rendering mvapich2 for profile %s: it derives from stacks.openmpi or stacks.mpich, and the profile has %s",
				profileName(p), has(p))
		}
		if err := profile.Validate(p); err != nil {
			return nil, fmt.Errorf("rendering mvapich2 for profile %s: %w", profileName(p), err)
		}
		return renderMVAPICH2(p)
	}
	s, ok := specs[stack]
	if !ok {
		return nil, unknownStack(stack)
	}
	st, ok := p.Stacks[stack]
	if !ok {
		return nil, fmt.Errorf("rendering %s for profile %s: the profile has no stacks.%s section (it has %s)", stack, profileName(p), stack, has(p))
	}
	if err := profile.Validate(p); err != nil {
		return nil, fmt.Errorf("rendering %s for profile %s: %w", stack, profileName(p), err)
	}
	var w writer
	w.comment(s.file + ": " + s.title + ", written by gotune from a tuned profile.")
	w.blank()
	w.paragraph("Where it goes: ", s.where)
	w.commands(s.usage)
	w.paragraph("What overrides it: ", s.overrides)
	for _, n := range s.notes {
		w.paragraph("", n)
	}
	w.blank()
	provenance(&w, p)
	w.comment(fmt.Sprintf("Measured with %s %s.", s.display, st.Version))
	if st.Confirmed != "" {
		w.comment("The whole file against the defaults, loaded as here: " + st.Confirmed + ".")
	}
	for _, param := range slices.Sorted(maps.Keys(st.Params)) {
		line, err := s.line(s.name(param), st.Params[param])
		if err != nil {
			return nil, fmt.Errorf("rendering %s for profile %s: stacks.%s.params.%s: %w", stack, profileName(p), stack, param, err)
		}
		w.blank()
		w.evidence(param, st.Evidence[param])
		w.line(line)
	}
	return w.bytes(), nil
}

// Lines are the value lines of stack's file for params, sorted by
// parameter, exactly as Render writes them: the tuner measures candidates
// through the lines users will install. Not for mvapich2, which derives.
func Lines(stack string, params map[string]string) ([]string, error) {
	s, ok := specs[stack]
	if !ok {
		return nil, unknownStack(stack)
	}
	var lines []string
	for _, param := range slices.Sorted(maps.Keys(params)) {
		line, err := s.line(s.name(param), params[param])
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", s.file, param, err)
		}
		lines = append(lines, line)
	}
	return lines, nil
}

// Var is the name stack's file (and, for the environment-file stacks, the
// environment) gives param: MPIR_CVAR_ for MPICH, UCX_, MIMALLOC_, Open
// MPI's own. Not for mvapich2.
func Var(stack, param string) (string, error) {
	s, ok := specs[stack]
	if !ok {
		return "", unknownStack(stack)
	}
	return s.name(param), nil
}

// spec is how one stack's file looks.
type spec struct {
	file, title, display string
	where, overrides     string
	usage                []string // shell lines, written unwrapped so they can be copied
	notes                []string
	name                 func(param string) string
	line                 func(name, value string) (string, error)
}

func unknownStack(stack string) error {
	return fmt.Errorf("unknown stack %q: gotune renders %s", stack, strings.Join(Stacks, ", "))
}

func derivable(p *profile.Profile) bool {
	_, ompi := p.Stacks["openmpi"]
	_, mpich := p.Stacks["mpich"]
	return ompi || mpich
}

// profileName names p in errors: its file, or else its hash.
func profileName(p *profile.Profile) string {
	if p.Path() != "" {
		return p.Path()
	}
	return hashOf(p)
}

func has(p *profile.Profile) string {
	if len(p.Stacks) == 0 {
		return "no stacks section"
	}
	return "stacks " + strings.Join(slices.Sorted(maps.Keys(p.Stacks)), ", ")
}

// hashOf is p's hash, or, for a profile never sealed, the hash of its content.
func hashOf(p *profile.Profile) string {
	if p.Hash != "" {
		return p.Hash
	}
	q := *p
	if err := profile.Seal(&q); err != nil {
		return "(unsealed)"
	}
	return q.Hash
}

// provenance says which profile and run the values come from.
func provenance(w *writer, p *profile.Profile) {
	w.comment("Profile " + hashOf(p) + ".")
	f := p.Fingerprint
	run := "Run " + orNone(p.Evidence.Run) + ", measured on " + orNone(f.Host)
	if f.CPUModel != "" {
		run += " (" + f.CPUModel + ")"
	}
	w.comment(run + ".")
	if len(p.Overrides) > 0 {
		w.paragraph("", "Rendered with environment overrides of the profile, so values may differ from the file with that hash: "+
			strings.Join(p.Overrides, " ")+".")
	}
}

// writer builds a file of comment and value lines.
type writer struct{ b strings.Builder }

func (w *writer) line(s string) { w.b.WriteString(s + "\n") }
func (w *writer) blank()        { w.b.WriteString("#\n") }
func (w *writer) bytes() []byte { return []byte(w.b.String()) }

// comment writes text as "# " lines wrapped at width; line breaks in text
// become blanks, so nothing of it can escape the comment.
func (w *writer) comment(text string) {
	for _, l := range wrap(strings.Join(strings.Fields(text), " "), width-2) {
		w.line("# " + l)
	}
}

// paragraph is a comment whose continuation lines are indented.
func (w *writer) paragraph(lead, text string) {
	lines := wrap(lead+strings.Join(strings.Fields(text), " "), width-2)
	for i, l := range lines {
		if i > 0 {
			l = "  " + l
		}
		w.line("# " + l)
	}
}

// commands writes shell lines as indented comments, unwrapped.
func (w *writer) commands(lines []string) {
	for _, l := range lines {
		w.line("#     " + l)
	}
}

// evidence writes what a value rests on, or that nothing was recorded.
func (w *writer) evidence(param, e string) {
	if e == "" {
		e = "no evidence recorded"
	}
	w.paragraph(param+": ", e)
}

// wrap breaks text into lines of at most n bytes at blanks, and a word
// longer than n anywhere.
func wrap(text string, n int) []string {
	var out []string
	cur := ""
	for _, word := range strings.Fields(text) {
		for len(word) > n {
			if cur != "" {
				out = append(out, cur)
				cur = ""
			}
			out = append(out, word[:n])
			word = word[n:]
		}
		switch {
		case cur == "":
			cur = word
		case len(cur)+1+len(word) <= n-2: // room for a continuation's indent
			cur += " " + word
		default:
			out = append(out, cur)
			cur = word
		}
	}
	if cur != "" || len(out) == 0 {
		out = append(out, cur)
	}
	return out
}

// shellSafe values need no quotes in a POSIX shell.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// envLine is NAME=value as a POSIX shell reads it: quoted where needed.
func envLine(name, value string) (string, error) {
	if shellSafe.MatchString(value) {
		return name + "=" + value, nil
	}
	return name + "='" + strings.ReplaceAll(value, "'", `'\''`) + "'", nil
}

// confLine checks a value for a "name = value" file whose parser trims
// blanks and reads one line per value.
func confLine(sep string) func(name, value string) (string, error) {
	return func(name, value string) (string, error) {
		if strings.TrimSpace(value) != value {
			return "", fmt.Errorf("%q has leading or trailing blanks, which the stack's parser strips", value)
		}
		return name + sep + value, nil
	}
}

func orNone(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}
