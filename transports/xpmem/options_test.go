package xpmem_test

import (
	"testing"

	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/xpmem"
)

// Options is ParseParams' inverse: what it writes reads back the same.
func TestOptionsRoundTrip(t *testing.T) {
	const eager = 4096
	testutil.RoundTrip(t, []xpmem.Params{
		{Pull: true, Threshold: eager + 1, Cache: xpmem.DefaultCache, Align: xpmem.DefaultAlign, Device: "/dev/xpmem"},
		{Pull: false, Threshold: 1 << 20, Cache: 0, Align: 4096, Device: xpmem.Fake},
		{Pull: true, Threshold: 8193, Cache: 3, Align: 2 << 20, Device: "/tmp/xpmem", LockedHook: true},
	}, xpmem.Params.Options, func(o transports.Options) (xpmem.Params, error) { return xpmem.ParseParams(o, eager) })
}
