package hostmem

import (
	"testing"

	"github.com/gotune/gotune/transports"
)

// Each documented default is the value the parsers use when the option is
// not given (docs/options.md is generated from Options).
func TestOptionDefaultsAreTheBuiltIns(t *testing.T) {
	want, err := ParseConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range Options.Options {
		opts := transports.Options{o.Key: o.Default}
		got, err := ParseConfig(opts)
		entries, eerr := ParseEntryStorage(opts)
		if err != nil || eerr != nil || got != want || entries != HeapEntries {
			t.Errorf("%s=%s gives %+v (%v), entries %v (%v); the built-in is %+v, heap", o.Key, o.Default, got, err, entries, eerr, want)
		}
	}
}
