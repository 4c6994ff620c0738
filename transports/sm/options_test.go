package sm

import (
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/transporttest"
)

// Each option documents its default, the value ParseParams uses when the
// option is not given (docs/options.md is generated from Options).
func TestOptionDefaultsAreTheBuiltIns(t *testing.T) {
	transporttest.DefaultsAreBuiltIns(t, Options, true, ParseParams)
}

// ChannelParams gives what ParseParams gives for the same decision written
// as options.
func TestChannelParamsMatchesOptions(t *testing.T) {
	for _, c := range []struct {
		ch   Channel
		opts transports.Options
	}{
		{Channel{Depth: 64, CellSize: CellFor(4096), EagerLimit: 4096, FragSize: 64 << 10, FragSlots: 64},
			transports.Options{"sm.depth": "64", "sm.cell": "4672", "sm.eager": "4K", "sm.frag": "64K", "sm.frags": "64"}},
		{Channel{Depth: 8, CellSize: 1280, EagerLimit: 1024, FragSize: 2 << 20, FragSlots: 4, Copy: "movsb", Progress: "thread"},
			transports.Options{"sm.depth": "8", "sm.cell": "1280", "sm.eager": "1K", "sm.frag": "2M", "sm.frags": "4", "sm.copy": "movsb", "sm.progress": "thread"}},
		{Channel{Depth: 16, CellSize: 640, EagerLimit: 256, FragSize: 32 << 10, FragSlots: 8, Progress: "poll"},
			transports.Options{"sm.depth": "16", "sm.cell": "640", "sm.eager": "256", "sm.frag": "32K", "sm.frags": "8"}},
	} {
		want, err := ParseParams(c.opts)
		if err != nil {
			t.Fatalf("%v: %v", c.opts, err)
		}
		got, err := ChannelParams(c.ch)
		if err != nil {
			t.Fatalf("%+v: %v", c.ch, err)
		}
		if got != want {
			t.Errorf("ChannelParams(%+v) = %+v, ParseParams gives %+v", c.ch, got, want)
		}
	}
	for _, bad := range []Channel{
		{Depth: 0, CellSize: 640, EagerLimit: 256, FragSize: 32 << 10, FragSlots: 8},
		{Depth: 8, CellSize: 640, EagerLimit: 256, FragSize: 32 << 10, FragSlots: 8, Copy: "memcpy"},
		{Depth: 8, CellSize: 640, EagerLimit: 256, FragSize: 32 << 10, FragSlots: 8, Progress: "interrupt"},
	} {
		if _, err := ChannelParams(bad); err == nil {
			t.Errorf("ChannelParams(%+v): no error", bad)
		}
	}
}

// Options is ParseParams' inverse: what it writes reads back the same.
func TestOptionsRoundTrip(t *testing.T) {
	wide := DefaultParams()
	wide.Depth, wide.AutoDepth, wide.CellSize, wide.EagerLimit, wide.FragSize, wide.FragSlots = 8, false, 1280, 1024, 2<<20, 4
	wide.Copy, wide.Progress, wide.Wrap, wide.Streams, wide.StreamMin = "movsb", "thread", 0, 1, 0
	wide.Park = 2500 * time.Microsecond
	unsafe := DefaultParams()
	unsafe.NoDrainOnSend, unsafe.LeakPersistent, unsafe.CellSize, unsafe.EagerLimit = true, true, 128, 64
	for name, p := range map[string]Params{"built-in": DefaultParams(), "wide": wide, "unsafe": unsafe} {
		if got, err := ParseParams(p.Options()); err != nil || got != p {
			t.Errorf("%s: ParseParams(%v) = %+v, %v; want %+v", name, p.Options(), got, err, p)
		}
	}
}

// sm.park reads Go durations; a bad one is an error naming the key.
func TestParkOption(t *testing.T) {
	for _, c := range []struct {
		value string
		want  time.Duration
		err   bool
	}{
		{"0", 0, false},
		{"50us", 50 * time.Microsecond, false},
		{"50µs", 50 * time.Microsecond, false},
		{"2ms", 2 * time.Millisecond, false},
		{"50", 0, true},
		{"soon", 0, true},
		{"-1ms", 0, true},
	} {
		// As an option, and as a profile's decision takes it.
		opt, err := ParseParams(transports.Options{KeyPark: c.value})
		ch, chErr := ChannelParams(Channel{Depth: 64, CellSize: CellFor(4096), EagerLimit: 4096, FragSize: 64 << 10, FragSlots: 64, Park: c.value})
		for _, r := range []struct {
			how string
			p   Params
			err error
		}{{"option", opt, err}, {"channel", ch, chErr}} {
			switch {
			case c.err && r.err == nil:
				t.Errorf("%s sm.park=%s: no error", r.how, c.value)
			case c.err && !strings.Contains(r.err.Error(), KeyPark):
				t.Errorf("%s sm.park=%s: error %q does not name the key", r.how, c.value, r.err)
			case !c.err && r.err != nil:
				t.Errorf("%s sm.park=%s: %v", r.how, c.value, r.err)
			case !c.err && r.p.Park != c.want:
				t.Errorf("%s sm.park=%s: %v, want %v", r.how, c.value, r.p.Park, c.want)
			}
		}
	}
	// No park in a profile's decision: the built-in.
	if ch, err := ChannelParams(Channel{Depth: 64, CellSize: CellFor(4096), EagerLimit: 4096, FragSize: 64 << 10, FragSlots: 64}); err != nil || ch.Park != DefaultPark {
		t.Errorf("a channel without park: %v, %v; want the built-in %v", ch.Park, err, DefaultPark)
	}
}
