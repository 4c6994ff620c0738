package probe

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/nccl"
)

// N1's big size is four of the buffers NCCL will use: its default, or the
// candidate's NCCL_BUFFSIZE.
func TestN1Size(t *testing.T) {
	key, _ := nccl.OptionFor("NCCL_BUFFSIZE")
	for _, c := range []struct {
		opts transports.Options
		want int
		err  string
	}{
		{nil, 16 << 20, ""},
		{transports.Options{key: "8M"}, 32 << 20, ""},
		{transports.Options{key: "big"}, 0, key},
	} {
		got, err := n1Size(c.opts)
		if (err != nil) != (c.err != "") || (err != nil && !strings.Contains(err.Error(), c.err)) || got != c.want {
			t.Errorf("%v: %d, %v; want %d, error naming %q", c.opts, got, err, c.want, c.err)
		}
	}
}

// Through the installed NCCL on two GPUs: grouped head-to-head sends pass,
// blocking ones hang (at 64 KiB with NCCL 2.28.3 on NVLink: in the pair's
// connection).
func TestN1OnNCCL(t *testing.T) {
	needNCCLPair(t)
	p, err := Lookup("N1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		unsafe bool
		want   Outcome
	}{{false, Passed}, {true, HazardDetected}} {
		v := RunWith(context.Background(), p, c.unsafe, 10*time.Second, nil)
		t.Logf("%s", v.Line())
		if v.Outcome != c.want || (c.unsafe && !strings.Contains(v.Detail, "head to head: hang")) {
			t.Errorf("%s: want %s, the unsafe one as a hang", v.Line(), c.want)
		}
	}
}

// N2, N3 and N4 through the installed NCCL on two GPUs: the safe forms
// pass their validation; what the unsafe forms do on this NCCL is the
// finding their verdict records (docs/hazards.md), logged here.
func TestNCCLSettingsOnNCCL(t *testing.T) {
	needNCCLPair(t)
	for _, id := range []string{"N2", "N3", "N4"} {
		p, err := Lookup(id)
		if err != nil {
			t.Fatal(err)
		}
		if v := RunWith(context.Background(), p, false, 10*time.Second, nil); v.Outcome != Passed {
			t.Errorf("%s: want the safe form passed", v.Line())
		}
		t.Logf("%s", RunWith(context.Background(), p, true, 10*time.Second, nil).Line())
	}
}

// The settings line names every variable a probe sets, in order.
func TestSettingLine(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "NCCL's defaults"},
		{map[string]string{"NCCL_PROTO": "LL128,Simple", "NCCL_ALGO": "Ring", "NCCL_LL128_BUFFSIZE": "131072"},
			"NCCL_ALGO=Ring NCCL_LL128_BUFFSIZE=131072 NCCL_PROTO=LL128,Simple"},
	} {
		if got := settingLine(c.env); got != c.want {
			t.Errorf("settingLine(%v) = %q, want %q", c.env, got, c.want)
		}
	}
}

// needNCCLPair skips (or, where GOTUNE_REQUIRE names nccl, fails) without
// NCCL and two GPUs, which the NCCL probes run on.
func needNCCLPair(t *testing.T) {
	t.Helper()
	err := nccl.Present(nil)
	if err == nil {
		if n, derr := cuda.DeviceCount(); derr == nil && n < 2 {
			err = fmt.Errorf("%w: %d GPU(s), the NCCL probes need 2", sys.ErrNotSupported, n)
		}
	}
	testutil.SkipUnless(t, "nccl", err)
}
