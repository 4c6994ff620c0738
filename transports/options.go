package transports

import (
	"slices"
)

// Option documents one option a package reads: its key, the values it
// takes, its built-in value and what it means. docs/options.md is
// generated from these.
type Option struct {
	Key string
	// Type is "size" (a byte count; K, M, G are powers of 1024), "int",
	// "list" (comma-separated), "path", "text", or the allowed values
	// separated by '|'.
	Type string
	// Default is the built-in value as the package's parser reads it; ""
	// when there is none or it is derived from other options (Help says how).
	Default string
	Help    string
}

// OptionSet is the options one package reads.
type OptionSet struct {
	Name    string // the package, as users know it: "sm", "cma", "alloc"
	Options []Option
}

// Has reports whether key is one of the set's options.
func (s *OptionSet) Has(key string) bool {
	return slices.ContainsFunc(s.Options, func(o Option) bool { return o.Key == key })
}

// Keys lists the set's keys, sorted.
func (s *OptionSet) Keys() []string {
	keys := make([]string, len(s.Options))
	for i, o := range s.Options {
		keys[i] = o.Key
	}
	slices.Sort(keys)
	return keys
}

// Choice is yes when b holds, else no: an option's value for a flag or a
// two-way setting, as a Params' Options writes it.
func Choice(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}
