package transporttest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gotune/gotune/transports"
)

// DefaultsAreBuiltIns checks that every documented default of set is what
// parse gives without the option (docs/options.md is generated from the
// sets), and returns the built-in. An option without a documented default
// (derived from others, as its help says) is passed over, or fails the test
// where every option must document one.
func DefaultsAreBuiltIns[P any](t *testing.T, set *transports.OptionSet, everyOption bool, parse func(transports.Options) (P, error)) P {
	t.Helper()
	want, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range set.Options {
		if o.Default == "" {
			if everyOption {
				t.Errorf("%s: no documented default", o.Key)
			}
			continue
		}
		got, err := parse(transports.Options{o.Key: o.Default})
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s=%s gives %+v, %v; the built-in is %+v", o.Key, o.Default, got, err, want)
		}
	}
	return want
}

// ParseCase is a set of options and a part of the error parsing them
// gives ("": they are accepted). An alias of an unnamed struct, so that
// tables list their cases positionally.
type ParseCase = struct {
	Opts transports.Options
	Err  string
}

// ParseErrors checks that parse accepts or refuses each case's options
// as the case says.
func ParseErrors[P any](t *testing.T, parse func(transports.Options) (P, error), cases []ParseCase) {
	t.Helper()
	for _, c := range cases {
		ParseError(t, parse, c.Opts, c.Err)
	}
}

// ParseError checks that parse accepts opts (want "") or refuses them with
// an error containing want, and returns what it gave.
func ParseError[P any](t *testing.T, parse func(transports.Options) (P, error), opts transports.Options, want string) (P, error) {
	t.Helper()
	p, err := parse(opts)
	if (err == nil) != (want == "") || err != nil && !strings.Contains(err.Error(), want) {
		t.Errorf("%v: got error %v, want one containing %q (none: accepted)", opts, err, want)
	}
	return p, err
}
