package cma_test

import (
	"testing"

	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cma"
	"github.com/gotune/gotune/transports/transporttest"
)

func parse(o transports.Options) (cma.Params, error) { return cma.ParseParams(o, 4096) }

// Each documented default is the value ParseParams uses when the option is
// not given; cma.threshold's is derived from sm.eager, as its help says.
func TestOptionDefaultsAreTheBuiltIns(t *testing.T) {
	transporttest.DefaultsAreBuiltIns(t, cma.Options, false, parse)
}

func TestParseParams(t *testing.T) {
	transporttest.ParseErrors(t, parse, []transporttest.ParseCase{
		{nil, ""},
		{transports.Options{"cma.mode": "push", "cma.chunk": "64K", "cma.threshold": "16K"}, ""},
		{transports.Options{"cma.mode": "split"}, ""},
		{transports.Options{"cma.mode": "pull-ish"}, `cma.mode="pull-ish"`},
		{transports.Options{"cma.threshold": "4096"}, "cma.threshold=4096"},
		{transports.Options{"cma.chunk": "lots"}, `cma.chunk="lots"`},
		{transports.Options{"cma.onerror": "ignore"}, ""},
		{transports.Options{"cma.onerror": "retry"}, `cma.onerror="retry"`},
	})
	if p, _ := parse(nil); !p.Pull || p.Threshold != 4097 || p.Chunk != 0 || p.IgnoreErrors {
		t.Errorf("defaults: %+v", p)
	}
}

// Options is ParseParams' inverse: what it writes reads back the same.
func TestOptionsRoundTrip(t *testing.T) {
	const eager = 4096
	testutil.RoundTrip(t, []cma.Params{
		{Pull: true, Threshold: eager + 1},
		{Pull: false, Chunk: 64 << 10, Threshold: 1 << 20},
		{Pull: true, Threshold: 8193, IgnoreErrors: true},
		{Pull: true, Split: true, Threshold: eager + 1},
	}, cma.Params.Options, func(o transports.Options) (cma.Params, error) { return cma.ParseParams(o, eager) })
}
