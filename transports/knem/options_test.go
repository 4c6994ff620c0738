package knem_test

import (
	"testing"

	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/knem"
	"github.com/gotune/gotune/transports/transporttest"
)

func parse(o transports.Options) (knem.Params, error) { return knem.ParseParams(o, 4096) }

// Each documented default is the value ParseParams uses when the option is
// not given; knem.threshold's is derived from sm.eager, as its help says.
func TestOptionDefaultsAreTheBuiltIns(t *testing.T) {
	transporttest.DefaultsAreBuiltIns(t, knem.Options, false, parse)
}

func TestParseParams(t *testing.T) {
	transporttest.ParseErrors(t, parse, []transporttest.ParseCase{
		{nil, ""},
		{transports.Options{"knem.mode": "push", "knem.regions": "cached", "knem.cache": "8", "knem.dma": "auto", "knem.threshold": "16K"}, ""},
		{transports.Options{"knem.mode": "sideways"}, `knem.mode="sideways"`},
		{transports.Options{"knem.threshold": "4096"}, "knem.threshold=4096"},
		{transports.Options{"knem.regions": "some"}, `knem.regions="some"`},
		{transports.Options{"knem.cache": "0"}, "knem.cache=0"},
		{transports.Options{"knem.dma": "maybe"}, `knem.dma="maybe"`},
		{transports.Options{"knem.device": ""}, "knem.device: empty"},
	})
	if p, _ := parse(nil); !p.Pull || p.Threshold != 4097 || p.Cached || p.Cache != knem.DefaultCache || p.DMA != "off" || p.Device != "/dev/knem" {
		t.Errorf("defaults: %+v", p)
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
