package cudaipc

import (
	"testing"

	"github.com/gotune/gotune/transports/transporttest"
)

// Each documented default is the value ParseParams uses when the option is
// not given; cudaipc.gpus has no built-in value, as its help says.
func TestOptionDefaultsAreTheBuiltIns(t *testing.T) {
	transporttest.DefaultsAreBuiltIns(t, Options, false, ParseParams)
}
