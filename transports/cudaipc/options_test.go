package cudaipc

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/gpumem"
	"github.com/gotune/gotune/transports/sm"
	"github.com/gotune/gotune/transports/transporttest"
)

// Each documented default is the value ParseParams uses when the option is
// not given; cudaipc.gpus has no built-in value, as its help says.
func TestOptionDefaultsAreTheBuiltIns(t *testing.T) {
	transporttest.DefaultsAreBuiltIns(t, Options, false, ParseParams)
}

// Options is ParseParams' inverse: what it writes reads back the same.
func TestOptionsRoundTrip(t *testing.T) {
	testutil.RoundTrip(t, []Params{
		{Staging: "async", Threshold: DefaultThreshold, PinnedThreshold: DefaultPinnedThreshold, Copy: CopyEngine, Completion: CompleteEvent, Cache: DefaultCache, Alloc: DefaultAlloc},
		{Staging: "sync", Threshold: 64 << 10, PinnedThreshold: 0, Copy: CopySM, Completion: CompleteSync, Cache: 0, GPUs: []int{1, 0}, Alloc: gpumem.Plain},
		{Staging: "async", Threshold: 1, PinnedThreshold: 1 << 20, Copy: CopyEngine, Completion: CompleteEvent, Cache: 16, GPUs: []int{3}, Alloc: gpumem.Worker},
		{Staging: "async", Threshold: 0, PinnedThreshold: 1 << 20, Copy: CopySM, Completion: CompleteFlag, Relay: 4096, Cache: 16, Alloc: gpumem.Pool},
	}, Params.Options, ParseParams)
}

// A relay needs a completion that waits for its word, and a size its
// bell's words carry; the error names the key.
func TestRelayOptionRefusals(t *testing.T) {
	for _, o := range []transports.Options{
		{KeyRelay: "1K", KeyCompletion: CompleteSync},
		{KeyRelay: "-1"},
		{KeyRelay: "1000000000000000"},
	} {
		if _, err := ParseParams(o); err == nil || !strings.Contains(err.Error(), KeyRelay) {
			t.Errorf("ParseParams(%v) = %v, want an error naming %s", o, err, KeyRelay)
		}
	}
}

// A profile's GPU section gives the options it decides.
func TestProfileOptions(t *testing.T) {
	for _, c := range []struct {
		g    profile.GPU
		want transports.Options
	}{
		{profile.GPU{GPUs: "0,1", IPCThreshold: 0, Staging: "async", PinnedThreshold: 256 << 10, Allocator: "pool", Copy: "ce", Completion: "flag", Relay: 65536, IPCCache: 16},
			transports.Options{KeyGPUs: "0,1", KeyThreshold: "0", KeyStaging: "async", KeyPinnedThreshold: "262144", gpumem.OptionKey: "pool", KeyCopy: "ce", KeyCompletion: "flag", KeyRelay: "65536", KeyCache: "16"}},
		{profile.GPU{IPCThreshold: 1 << 20, Staging: "sync", PinnedThreshold: 0},
			transports.Options{KeyThreshold: "1048576", KeyStaging: "sync", KeyPinnedThreshold: "0"}},
	} {
		if got := ProfileOptions(&c.g); !reflect.DeepEqual(got, c.want) {
			t.Errorf("ProfileOptions(%+v) = %v, want %v", c.g, got, c.want)
		}
	}
}

// Polling drops the progress mode and nothing else, leaving its argument be.
func TestPolling(t *testing.T) {
	in := transports.Options{sm.KeyProgress: "thread", sm.KeyEager: "8K", KeyGPUs: "0,1"}
	got := Polling(in)
	if want := (transports.Options{sm.KeyEager: "8K", KeyGPUs: "0,1"}); !reflect.DeepEqual(got, want) || len(in) != 3 {
		t.Errorf("Polling(%v) = %v, want %v (and the argument kept)", in, got, want)
	}
}
