package probe

import (
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/internal/verbs"
)

// H7 needs an RDMA device (make vmtest runs it on Soft-RoCE). Safe passes
// with validated data and says which protection held; the unsafe form is
// caught where the kernel lacks copy-on-fork for pinned pages, and where
// it has it (rdma-core: IBV_FORK_UNNEEDED) the verdict says the hazard
// cannot show here.
func TestH7ForkWithRegisteredMemory(t *testing.T) {
	c, err := verbs.Open("")
	if err != nil {
		testutil.SkipUnless(t, "rdma", err)
	}
	c.Close()
	p, ctx := lookupProbe(t, "H7", 5*time.Minute)
	v := p.Run(ctx, false, 30*time.Second)
	t.Log(v.Line())
	if v.Outcome != Passed || !strings.Contains(v.Detail, "fork protection") {
		t.Fatalf("safe H7: %s", v.Line())
	}
	u := p.Run(ctx, true, 30*time.Second)
	t.Log(u.Line())
	switch {
	case u.Outcome == HazardDetected:
	case u.Outcome == Passed && strings.Contains(u.Detail, "copies pinned pages"):
		t.Logf("unsafe H7 not hazardous on this kernel (copy-on-fork): the detector's own check is the registration-cache twin in transports/ib")
	default:
		t.Fatalf("unsafe H7: %s", u.Line())
	}
}
