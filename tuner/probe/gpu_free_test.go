package probe

import (
	"strings"
	"testing"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/gpumem"
)

// H2's safe form probes the configuration's allocator, by default the one
// the GPU transport uses; the unsafe form always frees with cuMemFree.
func TestH2Mode(t *testing.T) {
	for _, tc := range []struct {
		opts   transports.Options
		unsafe bool
		want   gpumem.Mode
		err    string
	}{
		{nil, false, gpumem.Pool, ""},
		{transports.Options{gpumem.OptionKey: "worker"}, false, gpumem.Worker, ""},
		{transports.Options{gpumem.OptionKey: "worker"}, true, gpumem.Plain, ""},
		{nil, true, gpumem.Plain, ""},
		{transports.Options{gpumem.OptionKey: "cudaFree"}, false, "", gpumem.OptionKey},
	} {
		got, err := H2Mode(tc.opts, tc.unsafe)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("H2Mode(%v, %v): error %v, want one naming %s", tc.opts, tc.unsafe, err, tc.err)
			}
		case err != nil || got != tc.want:
			t.Errorf("H2Mode(%v, %v) = %v, %v; want %v", tc.opts, tc.unsafe, got, err, tc.want)
		}
	}
}
