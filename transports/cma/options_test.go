package cma_test

import (
	"testing"

	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cma"
)

// Each documented default is the value ParseParams uses when the option is
// not given (docs/options.md is generated from Options).
func TestOptionDefaultsAreTheBuiltIns(t *testing.T) {
	const eager = 4096
	want, err := cma.ParseParams(nil, eager)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range cma.Options.Options {
		if o.Default == "" {
			continue // derived from sm.eager, as its help says
		}
		got, err := cma.ParseParams(transports.Options{o.Key: o.Default}, eager)
		if err != nil || got != want {
			t.Errorf("%s=%s gives %+v, %v; the built-in is %+v", o.Key, o.Default, got, err, want)
		}
	}
}

// Options is ParseParams' inverse: what it writes reads back the same.
func TestOptionsRoundTrip(t *testing.T) {
	const eager = 4096
	testutil.RoundTrip(t, []cma.Params{
		{Pull: true, Threshold: eager + 1},
		{Pull: false, Chunk: 64 << 10, Threshold: 1 << 20},
		{Pull: true, Threshold: 8193, IgnoreErrors: true},
	}, cma.Params.Options, func(o transports.Options) (cma.Params, error) { return cma.ParseParams(o, eager) })
}
