package hostmem

import (
	"errors"
	"testing"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/transporttest"
)

// Each documented default is the value the parsers use when the option is
// not given (docs/options.md is generated from Options).
func TestOptionDefaultsAreTheBuiltIns(t *testing.T) {
	type parsed struct {
		Config
		Entries EntryStorage
	}
	builtIn := transporttest.DefaultsAreBuiltIns(t, Options, true, func(o transports.Options) (parsed, error) {
		c, err := ParseConfig(o)
		entries, eerr := ParseEntryStorage(o)
		return parsed{c, entries}, errors.Join(err, eerr)
	})
	if builtIn.Entries != HeapEntries {
		t.Errorf("built-in registration cache table %v, want heap", builtIn.Entries)
	}
}
