package probe

import (
	"testing"
	"time"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cma"
	"github.com/gotune/gotune/transports/sm"
)

// H6's safe form falls back and reports clear errors for a peer that is
// gone; the unsafe form (errors ignored) delivers wrong bytes, and
// validation says so.
func TestH6SafePassesUnsafeCorrupts(t *testing.T) {
	p, ctx := passesSafe(t, "H6", 2*time.Second, "fell back", "pull and push", "has exited")
	caught(t, "unsafe H6", p.Run(ctx, true, 2*time.Second), "corrupted data")
	// A candidate configuration: its own chunking and progress mode.
	v := RunWith(ctx, p, false, 2*time.Second, transports.Options{cma.KeyChunk: "64K", sm.KeyProgress: "thread", sm.KeyFrags: "4"})
	if v.Outcome != Passed {
		t.Errorf("H6 on a configuration: %s", v.Line())
	}
	v = RunWith(ctx, p, false, 2*time.Second, transports.Options{cma.KeyOnError: "ignore"})
	if v.Outcome != HazardDetected {
		t.Errorf("H6 on a configuration that ignores copy errors: %s", v.Line())
	}
}
