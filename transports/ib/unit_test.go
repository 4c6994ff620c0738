package ib

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/gotune/gotune/internal/regcache"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/verbs"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/hostmem"
	"github.com/gotune/gotune/transports/transporttest"
)

func TestParseParams(t *testing.T) {
	p, err := ParseParams(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Params{GID: -1, Eager: DefaultEager, Credits: DefaultCredits, Depth: DefaultDepth, Rndv: "read", Wait: "poll"}
	if p != want {
		t.Errorf("defaults %+v, want %+v", p, want)
	}
	transporttest.ParseErrors(t, ParseParams, []transporttest.ParseCase{
		{transports.Options{"ib.rndv": "write", "ib.wait": "event", "ib.mtu": "2048", "ib.eager": "0", "ib.credits": "1", "ib.depth": "2", "ib.gid": "3", "ib.dev": "rxe0", "ib.port": "1"}, ""},
		{transports.Options{"ib.rndv": "get"}, "ib.rndv"},
		{transports.Options{"ib.wait": "sleep"}, "ib.wait"},
		{transports.Options{"ib.mtu": "1500"}, "ib.mtu"},
		{transports.Options{"ib.eager": "2M"}, "ib.eager"},
		{transports.Options{"ib.eager": "x"}, "ib.eager"},
		{transports.Options{"ib.credits": "0"}, "ib.credits"},
		{transports.Options{"ib.depth": "1"}, "ib.depth"},
		{transports.Options{"ib.gid": "-2"}, "ib.gid"},
		{transports.Options{"ib.port": "256"}, "ib.port"},
	})
	for _, o := range Options.Options {
		if _, err := ParseParams(transports.Options{o.Key: o.Default}); o.Default != "" && err != nil {
			t.Errorf("%s's documented default %q is refused: %v", o.Key, o.Default, err)
		}
	}
}

func TestConnInfoRoundTrip(t *testing.T) {
	c := connInfo{lid: 7, mtu: verbs.MTU(3), gid: verbs.GID{0xfe, 0x80, 15: 1}, psn: 0xabcdef, ctrl: 0x7f0000001000, ctrlKey: 99, eager: 8192, credits: 32, qpn: []uint32{0, 17, 18}}
	got, err := unmarshalConn(c.marshal(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if got.lid != c.lid || got.mtu != c.mtu || got.gid != c.gid || got.psn != c.psn || got.ctrl != c.ctrl || got.ctrlKey != c.ctrlKey ||
		got.eager != c.eager || got.credits != c.credits || got.ib || got.qpn[2] != 18 {
		t.Errorf("round trip: %+v, want %+v", got, c)
	}
	for _, bad := range [][]byte{nil, c.marshal()[:10], append(c.marshal(), 0)} {
		if _, err := unmarshalConn(bad, 3); err == nil {
			t.Errorf("%d bytes accepted", len(bad))
		}
	}
	b := c.marshal()
	b[4] = 9
	if _, err := unmarshalConn(b, 3); err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Errorf("version 9: %v", err)
	}
}

func TestWorkRequestIDs(t *testing.T) {
	for _, c := range []struct {
		typ, peer int
		idx       uint32
	}{{wRecv, 0, 0}, {wCredit, 4095, 1<<32 - 1}, {wWrite, 1, 77}} {
		typ, peer, idx := splitID(wrID(c.typ, c.peer, c.idx))
		if typ != c.typ || peer != c.peer || idx != c.idx {
			t.Errorf("%+v came back as %d %d %d", c, typ, peer, idx)
		}
	}
}

// fakeRegion counts deregistrations.
type fakeRegion struct {
	s      regcache.Span
	closed *int
}

func (f *fakeRegion) Keys() (uint32, uint32) { return uint32(f.s.Start), uint32(f.s.End) }
func (f *fakeRegion) Close() error           { *f.closed++; return nil }

func TestRegCache(t *testing.T) {
	var regs, closed int
	var c *regCache
	c = newRegCache(func(addr uintptr, n int) (region, error) {
		regs++
		// A hook firing while the cache registers (H1's shape: the
		// registration allocates, the allocator purges and runs its
		// hooks) must not need the cache lock: Invalidate and Stats
		// both work from here.
		c.Invalidate(0, 1)
		c.Stats()
		return &fakeRegion{s: regcache.Span{Start: addr, End: addr + uintptr(n)}, closed: &closed}, nil
	})
	pg := uintptr(sys.PageSize)
	a, err := c.get(10*pg+5, 100)
	if err != nil {
		t.Fatal(err)
	}
	if a.span != (regcache.Span{Start: 10 * pg, End: 11 * pg}) {
		t.Errorf("registered %#x-%#x, want the page", a.span.Start, a.span.End)
	}
	b, _ := c.get(10*pg+200, 8) // inside: a hit
	if b != a || regs != 1 {
		t.Errorf("second get: %p vs %p, %d registrations", b, a, regs)
	}
	c.put(a)
	c.put(b)
	big, _ := c.get(9*pg, int(3*pg)) // covers the first: it is dropped
	if closed != 1 {
		t.Errorf("covered unused entry not deregistered (%d closed)", closed)
	}
	// Invalidation while in use: dropped from the table at once,
	// deregistered at the last put.
	c.Invalidate(10*pg, int(pg))
	if st := c.Stats(); st.Entries != 0 || st.Deferred != 1 || closed != 1 {
		t.Errorf("after invalidating an entry in use: %+v, %d closed", st, closed)
	}
	c.put(big)
	if closed != 2 {
		t.Errorf("stale entry not deregistered at its last put (%d closed)", closed)
	}
	x, _ := c.get(20*pg, 10)
	c.put(x)
	c.Invalidate(20*pg+1, 1)
	if st := c.Stats(); st.Invalidations != 2 || st.Entries != 0 || closed != 3 || st.Misses != 3 || st.Hits != 1 {
		t.Errorf("stats %+v, %d closed", st, closed)
	}
	c.close()
	if _, err := c.get(pg, 1); err == nil {
		t.Error("get after close succeeded")
	}
}

// Invalidations from an allocator's release hook on other goroutines
// while the cache is used: every released range is gone before the next
// get returns (the queue is drained first), and nothing deadlocks.
func TestRegCacheHookedToAllocator(t *testing.T) {
	cfg := hostmem.DefaultConfig()
	cfg.Purge = hostmem.Immediate
	a, err := hostmem.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var mu sync.Mutex
	live := map[uintptr]bool{} // page ranges registered and not closed
	var c *regCache
	c = newRegCache(func(addr uintptr, n int) (region, error) {
		mu.Lock()
		live[addr] = true
		mu.Unlock()
		return &closer{f: func() { mu.Lock(); delete(live, addr); mu.Unlock() }}, nil
	})
	defer a.OnRelease(c.Invalidate)()
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				b, err := a.Alloc(64 << 10)
				if err != nil {
					t.Error(err)
					return
				}
				e, err := c.get(sys.AddressOf(b), len(b))
				if err != nil {
					t.Error(err)
					return
				}
				c.put(e)
				if err := a.Free(b); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := c.Stats()
	if st.Invalidations == 0 || st.Entries != 0 {
		t.Errorf("every buffer was released: %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(live) != 0 {
		t.Errorf("%d regions of released memory still registered", len(live))
	}
}

type closer struct{ f func() }

func (c *closer) Keys() (uint32, uint32) { return 0, 0 }
func (c *closer) Close() error           { c.f(); return nil }

func TestNoAllGather(t *testing.T) {
	_, err := New(transports.Env{Rank: 0, Size: 2})
	if err == nil || !strings.Contains(err.Error(), "AllGather") {
		t.Fatalf("got %v", err)
	}
	_, err = New(transports.Env{Options: transports.Options{"ib.rndv": "x"}})
	if err == nil || !strings.Contains(err.Error(), "ib.rndv") {
		t.Fatalf("got %v", err)
	}
}

// Without a device New says why, as not supported.
func TestNewWithoutDevice(t *testing.T) {
	if _, err := verbs.Open(""); err == nil {
		t.Skip("this machine has an RDMA device: the ranks' tests cover it")
	}
	_, err := New(transports.Env{Rank: 0, Size: 2, AllGather: func(b []byte) ([][]byte, error) { return [][]byte{b, b}, nil }})
	if !errors.Is(err, sys.ErrNotSupported) {
		t.Fatalf("got %v, want not supported", err)
	}
	t.Log(err)
}

func TestPickPort(t *testing.T) {
	gid := func(s string) verbs.GID {
		g, err := verbs.ParseGID(s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// rxe0 on veth0 (10.9.0.1) in the initial namespace, rxe1 on veth2
	// (10.9.1.1) in h1, rxe2 on veth3 (10.9.1.2) in h2: what every
	// namespace of the VM's hosts boot sees.
	roce := func(state, netdev, g string) []verbs.Port {
		return []verbs.Port{{Num: 1, State: state, LinkLayer: "Ethernet", Chosen: 1,
			GIDs: []verbs.GIDEntry{{Index: 1, GID: gid(g), Type: "RoCE v2", Netdev: netdev}}}}
	}
	devs := []verbs.Device{
		{Name: "rxe0", Ports: roce("ACTIVE", "veth0", "0000:0000:0000:0000:0000:ffff:0a09:0001")},
		{Name: "rxe1", Ports: roce("ACTIVE", "veth2", "0000:0000:0000:0000:0000:ffff:0a09:0101")},
		{Name: "rxe2", Ports: roce("ACTIVE", "veth3", "0000:0000:0000:0000:0000:ffff:0a09:0102")},
		{Name: "rxe3", Ports: roce("DOWN", "veth4", "0000:0000:0000:0000:0000:ffff:0a09:0103")},
	}
	h1 := verbs.NetView{"lo": {net.ParseIP("127.0.0.1")}, "veth2": {net.ParseIP("10.9.1.1")}}
	h2 := verbs.NetView{"veth3": {net.ParseIP("10.9.1.2")}}
	root := verbs.NetView{"veth0": {net.ParseIP("10.9.0.1")}, "veth1": nil}
	down := verbs.NetView{"veth4": {net.ParseIP("10.9.1.3")}}
	for _, c := range []struct {
		name string
		p    Params
		view verbs.NetView
		want string // "" when none
	}{
		{"h1 takes its own", Params{GID: -1}, h1, "rxe1"},
		{"h2 takes its own", Params{GID: -1}, h2, "rxe2"},
		{"initial namespace", Params{GID: -1}, root, "rxe0"},
		{"no view: the first active", Params{GID: -1}, nil, "rxe0"},
		{"nothing of mine: the first active", Params{GID: -1}, verbs.NetView{"eth0": {net.ParseIP("192.0.2.1")}}, "rxe0"},
		{"a down port of mine is passed over", Params{GID: -1}, down, "rxe0"},
		{"ib.dev wins over the namespace", Params{Dev: "rxe2", GID: -1}, h1, "rxe2"},
		{"ib.gid names an index the port lacks", Params{GID: 0}, h2, "rxe0"},
		{"ib.dev unknown", Params{Dev: "mlx5_0", GID: -1}, h1, ""},
		{"ib.port names a port (down: refused later)", Params{Dev: "rxe3", Port: 1, GID: -1}, h1, "rxe3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev, port, have := pickPort(devs, c.p, c.view)
			if dev != c.want || (port == nil) != (c.want == "") {
				t.Errorf("picked %q (port %v), want %q; passed over %v", dev, port, c.want, have)
			}
		})
	}
}
