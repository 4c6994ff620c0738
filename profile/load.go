package profile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts the name of every environment variable that overrides a
// profile key.
const EnvPrefix = "GOTUNE_"

// Load reads the profile at path, checks it (strict keys and types, format
// version, hash), applies overrides from the process environment and
// validates the result. Errors name the file and the key, one per line.
func Load(path string) (*Profile, error) {
	return LoadEnv(path, os.Environ())
}

// LoadEnv is Load with the environment given as NAME=value entries, as
// os.Environ returns them; nil means no overrides.
func LoadEnv(path string, environ []string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading profile: %w", err)
	}
	return parse(path, data, environ)
}

// parse is LoadEnv after reading the file: name is the file's name in errors.
func parse(name string, data []byte, environ []string) (*Profile, error) {
	p, err := load(data, environ)
	if err != nil {
		return nil, &fileError{file: name, err: err}
	}
	p.path = name
	return p, nil
}

// fileError prefixes every line of err (each of a joined error) with the file.
type fileError struct {
	file string
	err  error
}

func (e *fileError) Error() string {
	var b strings.Builder
	for i, leaf := range leaves(e.err) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.file)
		b.WriteString(": ")
		b.WriteString(leaf.Error())
	}
	return b.String()
}

func (e *fileError) Unwrap() error { return e.err }

func leaves(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}

func load(data []byte, environ []string) (*Profile, error) {
	if err := checkYAML(data).err(); err != nil {
		return nil, err
	}
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("reading YAML: %w", err)
	}

	// The version first: a newer format may have keys this one does not know.
	switch ver := v.Get("version").(type) {
	case nil:
		return nil, &keyError{"version", "missing: not a gotune profile?"}
	case int:
		if ver != FormatVersion {
			return nil, &keyError{"version", fmt.Sprintf("format version %d; this gotune reads version %d", ver, FormatVersion)}
		}
	}

	p, err := decode(v)
	if err != nil {
		return nil, err
	}

	switch want, err := hashOf(p); {
	case err != nil:
		return nil, err
	case p.Hash == "":
		return nil, &keyError{"hash", "missing: the file is cut short, or was never sealed"}
	case !hashPattern.MatchString(p.Hash):
		return nil, &keyError{"hash", fmt.Sprintf("%s is not sha256:<64 hex digits>: is the file cut short?", quote(p.Hash))}
	case p.Hash != want:
		return nil, &keyError{"hash", fmt.Sprintf("%s does not match the content (%s): the file was changed after it was sealed", p.Hash, want)}
	}

	ovs, ps := overrides(p, environ)
	if len(ps) > 0 {
		return nil, ps.err()
	}
	if len(ovs) > 0 {
		for _, o := range ovs {
			v.Set(o.key, o.value)
		}
		hash := p.Hash
		if p, err = decode(v); err != nil {
			return nil, fmt.Errorf("applying environment overrides: %w", err)
		}
		p.Hash = hash
		for _, o := range ovs {
			p.Overrides = append(p.Overrides, o.name+"="+o.raw)
		}
	}

	normalize(p)
	ps = validate(p)
	for _, pr := range ps {
		for _, o := range ovs {
			if pr.key == o.key {
				pr.msg += " (set by " + o.name + ")"
			}
		}
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// checkYAML checks what viper would silently lose or fold: it needs one
// document whose top level is a mapping, with keys that are unique
// lower-case strings without '.', and no anchors or aliases.
func checkYAML(data []byte) problems {
	var ps problems
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			ps.add("", "empty file")
		} else {
			ps.add("", "%v", err)
		}
		return ps
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		ps.add("", "a second YAML document at line %d: a profile is one document", extra.Line)
		return ps
	case !errors.Is(err, io.EOF):
		ps.add("", "%v", err)
		return ps
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		ps.add("", "empty file")
		return ps
	}
	if root.Kind != yaml.MappingNode {
		ps.add("", "line %d: the top level is %s, not a mapping", root.Line, nodeKind(root))
		return ps
	}
	checkNode(&ps, root, "")
	return ps
}

func checkNode(ps *problems, n *yaml.Node, key string) {
	if n.Anchor != "" {
		// Aliases would let a small file expand into a huge one; a profile
		// has no use for them.
		ps.add(key, "line %d: anchor &%s: a profile has no anchors or aliases", n.Line, n.Anchor)
		return
	}
	switch n.Kind {
	case yaml.AliasNode:
		ps.add(key, "line %d: alias *%s: a profile has no anchors or aliases", n.Line, n.Value)
	case yaml.MappingNode:
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				ps.add(key, "line %d: a key is %s, not a string", k.Line, nodeKind(k))
				continue
			}
			sub := join(key, k.Value)
			if !keyPattern.MatchString(k.Value) {
				ps.add(join(key, quote(k.Value)), "line %d: invalid key: keys are lower-case letters, digits, '_' and '-'", k.Line)
				continue
			}
			if line, dup := seen[k.Value]; dup {
				ps.add(sub, "line %d: duplicate key (first at line %d)", k.Line, line)
				continue
			}
			seen[k.Value] = k.Line
			checkNode(ps, val, sub)
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			checkNode(ps, e, fmt.Sprintf("%s[%d]", key, i))
		}
	}
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return "a scalar (" + n.ShortTag() + ")"
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// decode decodes viper's settings into a Profile strictly: no unknown key,
// no conversion between types.
func decode(v *viper.Viper) (*Profile, error) {
	p := new(Profile)
	err := v.Unmarshal(p, func(c *mapstructure.DecoderConfig) {
		c.ErrorUnused = true
		c.WeaklyTypedInput = false
		c.DecodeHook = mapstructure.DecodeHookFuncValue(strictTypes)
	})
	if err != nil {
		return nil, decodeProblems(err).err()
	}
	return p, nil
}

// typeError is a value of the wrong type.
type typeError struct {
	want string
	got  reflect.Value
}

func (e *typeError) Error() string {
	kind, value := describeValue(e.got)
	if value != "" {
		value = " " + value
	}
	return fmt.Sprintf("expected %s, got %s%s", e.want, kind, value)
}

// strictTypes lets through only values of the target's own kind, and integers
// only when they fit: mapstructure would otherwise truncate 4096.5 to 4096
// and wrap 2^64-1 to -1 even with WeaklyTypedInput off.
func strictTypes(from, to reflect.Value) (any, error) {
	for from.Kind() == reflect.Interface && !from.IsNil() {
		from = from.Elem()
	}
	if !from.IsValid() {
		return nil, nil
	}
	data := from.Interface()
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch from.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if to.OverflowInt(from.Int()) {
				return nil, fmt.Errorf("%d is out of range for %s", from.Int(), to.Type())
			}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if from.Uint() > math.MaxInt64 || to.OverflowInt(int64(from.Uint())) {
				return nil, fmt.Errorf("%d is out of range for %s", from.Uint(), to.Type())
			}
			return int64(from.Uint()), nil
		default:
			return nil, &typeError{"int", from}
		}
	case reflect.String:
		if from.Kind() != reflect.String {
			return nil, &typeError{"string", from}
		}
	case reflect.Bool:
		if from.Kind() != reflect.Bool {
			return nil, &typeError{"bool", from}
		}
	case reflect.Struct, reflect.Map:
		if from.Kind() != reflect.Map {
			return nil, &typeError{"a mapping", from}
		}
	case reflect.Slice:
		if from.Kind() != reflect.Slice && from.Kind() != reflect.Array {
			return nil, &typeError{"a list", from}
		}
	}
	return data, nil
}

// describeValue names a decoded YAML value's type, and shows it if scalar.
func describeValue(v reflect.Value) (kind, value string) {
	switch v.Kind() {
	case reflect.String:
		return "string", quote(v.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "int", strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "int", strconv.FormatUint(v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return "float", strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Bool:
		return "bool", strconv.FormatBool(v.Bool())
	case reflect.Map:
		return "a mapping", ""
	case reflect.Slice, reflect.Array:
		return "a list", ""
	}
	return v.Type().String(), ""
}

// quote quotes s for an error message, cut to a readable length.
func quote(s string) string {
	const max = 40
	if utf8.RuneCountInString(s) > max {
		r := []rune(s)
		return strconv.Quote(string(r[:max])) + "…"
	}
	return strconv.Quote(s)
}

// decodeProblems turns mapstructure's errors into problems named by key.
func decodeProblems(err error) problems {
	var ps problems
	var walk func(error)
	walk = func(err error) {
		var de *mapstructure.DecodeError
		if d, ok := err.(*mapstructure.DecodeError); ok {
			inner := d.Unwrap()
			if errors.As(inner, &de) {
				walk(inner)
				return
			}
			key := keyPath(d.Name())
			if unknown, ok := strings.CutPrefix(inner.Error(), "has invalid keys: "); ok {
				for _, k := range strings.Split(unknown, ", ") {
					ps.add(join(key, k), "unknown key")
				}
				return
			}
			ps.add(key, "%v", inner)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			if inner := u.Unwrap(); inner != nil && errors.As(inner, &de) {
				walk(inner)
				return
			}
			ps.add("", "%v", err)
		default:
			ps.add("", "%v", err)
		}
	}
	walk(err)
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].key < ps[j].key })
	return ps
}

// keyPath turns mapstructure's field name ("decisions[intranode][host_host].ranges[0].min")
// into the profile's key ("decisions.intranode.host_host.ranges[0].min"),
// telling map keys from list indices by the schema.
func keyPath(name string) string {
	t := reflect.TypeFor[Profile]()
	var b strings.Builder
	for name != "" {
		switch name[0] {
		case '.':
			name = name[1:]
		case '[':
			end := strings.IndexByte(name, ']')
			if end < 0 {
				b.WriteString(name)
				return b.String()
			}
			seg := name[1:end]
			name = name[end+1:]
			if t != nil && t.Kind() == reflect.Map {
				b.WriteString("." + seg)
			} else {
				b.WriteString("[" + seg + "]")
			}
			if t != nil && (t.Kind() == reflect.Map || t.Kind() == reflect.Slice) {
				t = t.Elem()
			} else {
				t = nil
			}
		default:
			end := strings.IndexAny(name, ".[")
			if end < 0 {
				end = len(name)
			}
			seg := name[:end]
			name = name[end:]
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(seg)
			t = fieldType(t, seg)
		}
	}
	return b.String()
}

// fieldType is the type of t's field tagged name, or nil.
func fieldType(t reflect.Type, name string) reflect.Type {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ","); tag == name {
			return f.Type
		}
	}
	return nil
}

// An override is an environment variable that sets a key.
type override struct {
	name, key, raw string
	value          any
}

// settable is a scalar key an environment variable may override.
type settable struct {
	key  string
	kind reflect.Kind
}

// overrides finds the environment variables that override keys of p, in
// the order of their names, and parses their values by the key's type.
func overrides(p *Profile, environ []string) ([]override, problems) {
	env := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		if _, seen := env[name]; !seen { // the first wins, as in os.Getenv
			env[name] = value
		}
	}
	if len(env) == 0 {
		return nil, nil
	}
	byName := map[string][]settable{}
	for _, s := range settableKeys(p) {
		name := EnvName(s.key)
		byName[name] = append(byName[name], s)
	}
	var (
		ovs []override
		ps  problems
	)
	for _, name := range slices.Sorted(maps.Keys(env)) {
		raw := env[name]
		keys := byName[name]
		if len(keys) == 0 || raw == "" {
			continue
		}
		if len(keys) > 1 {
			ps.add(name, "ambiguous: it names both %s and %s", keys[0].key, keys[1].key)
			continue
		}
		s := keys[0]
		var (
			value any
			err   error
			want  string
		)
		switch s.kind {
		case reflect.Int:
			want = "an int"
			value, err = strconv.ParseInt(raw, 10, strconv.IntSize)
		case reflect.Int64:
			want = "an int"
			value, err = strconv.ParseInt(raw, 10, 64)
		case reflect.Bool:
			want = "a bool"
			value, err = strconv.ParseBool(raw)
		default:
			value = raw
		}
		if err != nil {
			ps.add(name, "%s is not %s (it overrides %s)", quote(raw), want, s.key)
			continue
		}
		if s.kind == reflect.Int {
			value = int(value.(int64))
		}
		ovs = append(ovs, override{name: name, key: s.key, raw: raw, value: value})
	}
	return ovs, ps
}

// EnvName is the environment variable that overrides key:
// "allocator.purge" → GOTUNE_ALLOCATOR_PURGE.
func EnvName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}

// settableKeys lists the scalar keys of p that the environment may set:
// every scalar of the schema but version and hash, and the scalars of the
// map entries p has (libraries, decisions, and each stack's version, params
// and evidence).
func settableKeys(p *Profile) []settable {
	var out []settable
	for _, s := range scalarFields(reflect.TypeFor[Profile](), "") {
		if s.key != "version" && s.key != "hash" {
			out = append(out, s)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Libraries)) {
		out = append(out, settable{"libraries." + name, reflect.String})
	}
	decision := scalarFields(reflect.TypeFor[Decision](), "")
	for _, loc := range slices.Sorted(maps.Keys(p.Decisions)) {
		for _, pair := range slices.Sorted(maps.Keys(p.Decisions[loc])) {
			for _, s := range decision {
				out = append(out, settable{"decisions." + loc + "." + pair + "." + s.key, s.kind})
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Stacks)) {
		st := p.Stacks[name]
		out = append(out, settable{"stacks." + name + ".version", reflect.String})
		for _, param := range slices.Sorted(maps.Keys(st.Params)) {
			out = append(out, settable{"stacks." + name + ".params." + param, reflect.String})
		}
		for _, param := range slices.Sorted(maps.Keys(st.Evidence)) {
			out = append(out, settable{"stacks." + name + ".evidence." + param, reflect.String})
		}
	}
	return out
}

// scalarFields lists the scalar fields of struct type t and of its struct
// fields, by key.
func scalarFields(t reflect.Type, prefix string) []settable {
	var out []settable
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		switch k := f.Type.Kind(); k {
		case reflect.Struct:
			out = append(out, scalarFields(f.Type, prefix+name+".")...)
		case reflect.Int, reflect.Int64, reflect.String, reflect.Bool:
			out = append(out, settable{prefix + name, k})
		}
	}
	return out
}

// normalize makes empty maps and lists nil, as a load of their encoding
// gives, so that equal profiles are deeply equal.
func normalize(p *Profile) {
	if len(p.Scope.Hosts) == 0 {
		p.Scope.Hosts = nil
	}
	if len(p.Libraries) == 0 {
		p.Libraries = nil
	}
	if len(p.Safety) == 0 {
		p.Safety = nil
	}
	if len(p.Overrides) == 0 {
		p.Overrides = nil
	}
	if len(p.Decisions) == 0 {
		p.Decisions = nil
	}
	if len(p.Stacks) == 0 {
		p.Stacks = nil
	}
	for name, st := range p.Stacks {
		if len(st.Params) == 0 {
			st.Params = nil
		}
		if len(st.Evidence) == 0 {
			st.Evidence = nil
		}
		p.Stacks[name] = st
	}
	for _, pairs := range p.Decisions {
		for pair, d := range pairs {
			if len(d.Ranges) == 0 && d.Ranges != nil {
				d.Ranges = nil
				pairs[pair] = d
			}
		}
	}
}
