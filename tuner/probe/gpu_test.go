package probe

import (
	"context"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/gpumem"
)

// The GPU probes on a real device. H4's outcome is known in advance (a
// synchronous copy on the legacy stream waits for a kernel on a blocking
// stream); H2's are what the probe finds out about the driver, so the test
// requires only that each mode ran to a verdict, and logs it.
func TestGPUProbes(t *testing.T) {
	testutil.SkipUnless(t, "cuda", cuda.Load())
	if n, err := cuda.DeviceCount(); err != nil || n == 0 {
		testutil.SkipUnless(t, "gpu", transports.ErrNotSupported)
	}
	const deadline = 3 * time.Second
	ctx := context.Background()
	for _, c := range []struct {
		id     string
		unsafe bool
		opts   transports.Options
		want   Outcome // -1: not known in advance
	}{
		{"H4", false, nil, Passed},
		{"H4", true, nil, HazardDetected},
		{"H2", false, transports.Options{gpumem.OptionKey: "worker"}, -1},
		{"H2", false, transports.Options{gpumem.OptionKey: "pool"}, -1},
		{"H2", true, nil, -1},
	} {
		p, err := Lookup(c.id)
		if err != nil {
			t.Fatal(err)
		}
		v := RunWith(ctx, p, c.unsafe, deadline, c.opts)
		t.Logf("%s", v.Line())
		switch {
		case v.Outcome == ProbeFailed:
			t.Errorf("%s: the probe itself failed: %s", v.Line(), v.Detail)
		case c.want >= 0 && v.Outcome != c.want:
			t.Errorf("%s: want %s", v.Line(), c.want)
		}
	}
}
