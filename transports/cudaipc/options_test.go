package cudaipc

import (
	"reflect"
	"testing"

	"github.com/gotune/gotune/transports"
)

// Each documented default is the value ParseParams uses when the option is
// not given (docs/options.md is generated from Options).
func TestOptionDefaultsAreTheBuiltIns(t *testing.T) {
	want, err := ParseParams(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range Options.Options {
		if o.Default == "" {
			continue // no built-in value (cudaipc.gpus), as its help says
		}
		got, err := ParseParams(transports.Options{o.Key: o.Default})
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s=%s gives %+v, %v; the built-in is %+v", o.Key, o.Default, got, err, want)
		}
	}
}
