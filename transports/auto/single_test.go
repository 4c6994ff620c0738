package auto

import (
	"os"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/transports"
	_ "github.com/gotune/gotune/transports/cma"
	"github.com/gotune/gotune/transports/knem"
	"github.com/gotune/gotune/transports/sm"
)

// routeOf is a decision's routing: cma from 64 KiB, knem from 1 MiB.
func routeOf(ranges ...profile.Range) *Route {
	r := &Route{Profile: &profile.Profile{}}
	for _, rg := range ranges {
		r.mins = append(r.mins, rg.Min)
		mech := ""
		if rg.Protocol == "rendezvous" {
			mech = rg.Transport
		}
		r.single = append(r.single, mech)
		r.modes = append(r.modes, rg.Mode)
	}
	return r
}

// A decision whose ranges name two single-copy mechanisms builds both:
// the sender exports for knem only in knem's range, a message without a
// handle goes by cma, one with a handle by knem; invalidations reach
// knem's cached regions.
func TestRoutedSingleCopyByRange(t *testing.T) {
	r := routeOf(profile.Range{Min: 0, Transport: "sm", Protocol: "eager"}, profile.Range{Min: 4097, Transport: "sm", Protocol: "pipeline"},
		profile.Range{Min: 64 << 10, Transport: "cma", Protocol: "rendezvous"}, profile.Range{Min: 1 << 20, Transport: "knem", Protocol: "rendezvous"})
	env := transports.Env{Size: 1, PIDs: []int{os.Getpid()}, Options: transports.Options{"knem.device": knem.Fake, "knem.regions": "cached"}}
	c, err := newSingle(env, r)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if c.Name() != "cma+knem" || !c.Pull() || c.export == nil || len(c.byAddr) != 1 || len(c.invs) != 1 || len(c.closers) != 1 {
		t.Fatalf("built %s: pull %v, exporter %v, %d by address, %d invalidators, %d closers", c.Name(), c.Pull(), c.export != nil, len(c.byAddr), len(c.invs), len(c.closers))
	}
	for n, want := range map[int]string{4096: "", 65535: "", 64 << 10: "cma", 1<<20 - 1: "cma", 1 << 20: "knem"} {
		if got := r.MechanismFor(n); got != want || c.Rendezvous(n) != (want != "") {
			t.Errorf("%d bytes: mechanism %q, rendezvous %v; want %q", n, got, c.Rendezvous(n), want)
		}
	}
	src, err := sys.MapAnon(2<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Unmap(src)
	dst, err := sys.MapAnon(2<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Unmap(dst)
	for i := range src {
		src[i] = byte(i*13 + i>>10)
	}
	if h, err := c.Export(src[:100<<10], sm.PlaceHost, false); h != 0 || err != nil {
		t.Errorf("export in cma's range: handle %#x, %v; want none", h, err)
	}
	if err := c.Copy(os.Getpid(), dst[:100<<10], sm.PlaceHost, sys.AddressOf(src), true); err != nil || string(dst[:100<<10]) != string(src[:100<<10]) {
		t.Errorf("copy by address: %v", err)
	}
	h, err := c.Export(src, sm.PlaceHost, false)
	if err != nil || h == 0 {
		t.Fatalf("export in knem's range: handle %#x, %v", h, err)
	}
	clear(dst)
	if err := c.CopyHandle(os.Getpid(), dst, sm.PlaceHost, h, sys.AddressOf(src), true); err != nil || string(dst) != string(src) {
		t.Errorf("copy through knem's cookie: %v", err)
	}
	c.Release(h, true)
	l := &local{single: c}
	l.Invalidate(sys.AddressOf(src), len(src))
	if st := c.mechs["knem"].(*knem.Copier).Stats(); st.Invalidated != 1 {
		t.Errorf("knem after an invalidation: %+v", st)
	}
}

// Each range copies in its own direction: the receiver routes a message
// by its size's range (its mode, else its mechanism's), and a sender
// exports only for a handle-based mechanism that pulls. A handle-based
// mechanism's ranges keep one direction.
func TestRoutedSingleCopyDirections(t *testing.T) {
	r := routeOf(profile.Range{Min: 0, Transport: "sm", Protocol: "eager"},
		profile.Range{Min: 64 << 10, Transport: "cma", Protocol: "rendezvous", Mode: "pull"},
		profile.Range{Min: 256 << 10, Transport: "cma", Protocol: "rendezvous", Mode: "push"},
		profile.Range{Min: 1 << 20, Transport: "knem", Protocol: "rendezvous"},
		profile.Range{Min: 8 << 20, Transport: "cma", Protocol: "rendezvous"},
		profile.Range{Min: 32 << 20, Transport: "cma", Protocol: "rendezvous", Mode: "split"})
	env := transports.Env{Size: 1, PIDs: []int{os.Getpid()}, Options: transports.Options{"knem.device": knem.Fake, "knem.mode": "push"}}
	c, err := newSingle(env, r)
	if err != nil {
		t.Fatalf("cma pull and push beside knem push: %v", err)
	}
	defer c.close()
	if c.Pull() {
		t.Error("Pull: true, but the handle-based mechanism (knem) pushes: senders would export for nothing")
	}
	for _, tc := range []struct {
		n    int
		want sm.Route
	}{{64 << 10, sm.RoutePull}, {256<<10 - 1, sm.RoutePull}, {256 << 10, sm.RoutePush}, {1 << 20, sm.RoutePush}, {8 << 20, sm.RoutePull}, {32 << 20, sm.RouteSplit}} {
		if got := c.RouteFor(tc.n, sm.PlaceHost, sm.PlaceHost); got != tc.want {
			t.Errorf("RouteFor(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}

	r = routeOf(profile.Range{Min: 0, Transport: "sm", Protocol: "eager"},
		profile.Range{Min: 64 << 10, Transport: "knem", Protocol: "rendezvous", Mode: "pull"},
		profile.Range{Min: 1 << 20, Transport: "knem", Protocol: "rendezvous", Mode: "push"})
	if _, err := newSingle(env, r); err == nil || !strings.Contains(err.Error(), "knem's ranges copy in two directions") {
		t.Errorf("knem pulling at 64 KiB and pushing at 1 MiB: %v", err)
	}
	r = routeOf(profile.Range{Min: 0, Transport: "sm", Protocol: "eager"}, profile.Range{Min: 64 << 10, Transport: "shmem", Protocol: "rendezvous"})
	if _, err := newSingle(env, r); err == nil || !strings.Contains(err.Error(), `"shmem", which this build lacks`) {
		t.Errorf("unknown mechanism: %v", err)
	}
}
