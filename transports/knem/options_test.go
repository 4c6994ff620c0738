package knem_test

import (
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/knem"
)

// Each documented default is the value ParseParams uses when the option is
// not given (docs/options.md is generated from Options).
func TestOptionDefaultsAreTheBuiltIns(t *testing.T) {
	const eager = 4096
	want, err := knem.ParseParams(nil, eager)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range knem.Options.Options {
		if o.Default == "" {
			continue // derived from sm.eager, as its help says
		}
		got, err := knem.ParseParams(transports.Options{o.Key: o.Default}, eager)
		if err != nil || got != want {
			t.Errorf("%s=%s gives %+v, %v; the built-in is %+v", o.Key, o.Default, got, err, want)
		}
	}
}

func TestParseParams(t *testing.T) {
	cases := []struct {
		opts transports.Options
		want string
	}{
		{nil, ""},
		{transports.Options{"knem.mode": "push", "knem.regions": "cached", "knem.cache": "8", "knem.dma": "auto", "knem.threshold": "16K"}, ""},
		{transports.Options{"knem.mode": "sideways"}, `knem.mode="sideways"`},
		{transports.Options{"knem.threshold": "4096"}, "knem.threshold=4096"},
		{transports.Options{"knem.regions": "some"}, `knem.regions="some"`},
		{transports.Options{"knem.cache": "0"}, "knem.cache=0"},
		{transports.Options{"knem.dma": "maybe"}, `knem.dma="maybe"`},
		{transports.Options{"knem.device": ""}, "knem.device: empty"},
	}
	for _, c := range cases {
		p, err := knem.ParseParams(c.opts, 4096)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.opts, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: got %v, want error containing %q", c.opts, err, c.want)
		case c.want == "" && c.opts == nil && (!p.Pull || p.Threshold != 4097 || p.Cached || p.Cache != knem.DefaultCache || p.DMA != "off" || p.Device != "/dev/knem"):
			t.Errorf("defaults: %+v", p)
		}
	}
}

// Options is ParseParams' inverse: what it writes reads back the same.
func TestOptionsRoundTrip(t *testing.T) {
	const eager = 4096
	testutil.RoundTrip(t, []knem.Params{
		{Pull: true, Threshold: eager + 1, Cache: knem.DefaultCache, DMA: "off", Device: "/dev/knem"},
		{Pull: false, Threshold: 1 << 20, Cached: true, Cache: 8, DMA: "auto", Device: knem.Fake},
		{Pull: true, Threshold: 8193, Cached: true, Cache: 1, DMA: "on", Device: "/tmp/knem"},
	}, knem.Params.Options, func(o transports.Options) (knem.Params, error) { return knem.ParseParams(o, eager) })
}
