package auto

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

const golden = "../../profile/testdata/profile.yaml" // 0–4K eager, sm pipeline, cma from 1 MiB

func goldenHash(t *testing.T) string {
	t.Helper()
	p, err := profile.LoadEnv(golden, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.Hash
}

func TestRoutesFollowTheRanges(t *testing.T) {
	r, err := Load(transports.Options{"auto.profile": golden, "auto.hash": goldenHash(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n      int
		single bool
	}{{0, false}, {4096, false}, {4097, false}, {1048575, false}, {1048576, true}, {64 << 20, true}} {
		if got := r.Rendezvous(tc.n); got != tc.single {
			t.Errorf("Rendezvous(%d) = %v, want %v", tc.n, got, tc.single)
		}
	}
	if !r.UsesSingleCopy() {
		t.Error("UsesSingleCopy = false")
	}
	if r.SM.EagerLimit != 4096 || r.SM.Depth != 64 || r.SM.FragSize != 65536 || r.SM.FragSlots != 16 || r.SM.CellSize != 4160 {
		t.Errorf("sm parameters %+v do not follow the decision", r.SM)
	}
}

// A decision's parking delay reaches sm; a decision without one leaves
// the built-in.
func TestParkFollowsTheDecision(t *testing.T) {
	p, err := profile.LoadEnv(golden, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := Load(transports.Options{"auto.profile": golden, "auto.hash": p.Hash}); err != nil || r.SM.Park != sm.DefaultPark {
		t.Fatalf("no park in the decision: sm.park %v (%v), want the built-in %v", r.SM.Park, err, sm.DefaultPark)
	}
	d := p.Decisions[profile.Intranode][profile.HostHost]
	d.Park = "500us"
	p.Decisions[profile.Intranode][profile.HostHost] = d
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := profile.Write(path, p); err != nil {
		t.Fatal(err)
	}
	r, err := Load(transports.Options{"auto.profile": path, "auto.hash": p.Hash})
	if err != nil {
		t.Fatal(err)
	}
	if r.SM.Park != 500*time.Microsecond {
		t.Errorf("park 500us in the decision: sm.park %v", r.SM.Park)
	}
}

func TestLoadRefuses(t *testing.T) {
	hash := goldenHash(t)
	changed := filepath.Join(t.TempDir(), "p.yaml")
	p, err := profile.LoadEnv(golden, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Decisions[profile.Intranode][profile.HostHost] = func(d profile.Decision) profile.Decision { d.FIFODepth = 8; return d }(p.Decisions[profile.Intranode][profile.HostHost])
	if err := profile.Write(changed, p); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts transports.Options
		want string
	}{
		{"no profile", transports.Options{}, "needs a profile"},
		{"no hash", transports.Options{"auto.profile": golden}, "no auto.hash"},
		{"file changed since the launcher loaded it", transports.Options{"auto.profile": changed, "auto.hash": hash}, "the file changed"},
		{"overrides differ", transports.Options{"auto.profile": golden, "auto.hash": hash, "auto.overrides": "GOTUNE_X=1"}, "overrides"},
		{"no such decision", transports.Options{"auto.profile": golden, "auto.hash": hash, "auto.memory": "device_device"}, "decisions.intranode.device_device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := os.Stat(changed); err != nil {
		t.Fatal(err)
	}
}

// invalidating records invalidations; the rest of the interface is never called.
type invalidating struct {
	transports.Transport
	got []uintptr
}

func (f *invalidating) Invalidate(addr uintptr, n int) { f.got = append(f.got, addr) }

// An allocator hooked to auto reaches the routed inter-node transport's
// registration cache; a routed transport without one is left alone.
func TestRoutedPassesInvalidations(t *testing.T) {
	inner := &invalidating{}
	var tr transports.Transport = &routed{inner}
	inv, ok := tr.(transports.Invalidator)
	if !ok {
		t.Fatal("the routed transport offers no Invalidate")
	}
	inv.Invalidate(0x1000, 4096)
	if len(inner.got) != 1 || inner.got[0] != 0x1000 {
		t.Errorf("routed transport got %#x, want 0x1000", inner.got)
	}
	(&routed{struct{ transports.Transport }{}}).Invalidate(0x2000, 4096) // no cache: nothing to do
}

// The ranges' copy directions reach their transports as options.
func TestCopyModes(t *testing.T) {
	r := &Route{Decision: profile.Decision{Ranges: []profile.Range{
		{Min: 0, Transport: "sm", Protocol: "eager"},
		{Min: 65537, Transport: "cma", Protocol: "rendezvous", Mode: "push"},
		{Min: 1 << 22, Transport: "sm", Protocol: "pipeline"},
	}}}
	if got := r.CopyModes(); len(got) != 1 || got["cma.mode"] != "push" {
		t.Fatalf("CopyModes = %v, want cma.mode=push alone", got)
	}
}
