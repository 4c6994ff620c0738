package bench

import (
	"testing"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/hostmem"
)

// invalidating is a transport that records invalidations (the rest of
// the interface is never called).
type invalidating struct {
	transports.Transport
	got []uintptr
}

func (f *invalidating) Invalidate(addr uintptr, n int) { f.got = append(f.got, addr) }

// The alloc pattern's allocator tells the transport of every buffer it
// purges or unmaps while hooked, and nothing once unhooked.
func TestAllocHookReachesTransport(t *testing.T) {
	for _, c := range []struct {
		name string
		opts transports.Options
	}{
		{"purged at free", transports.Options{hostmem.KeyPurge: "immediate"}},
		{"unmapped at free", transports.Options{hostmem.KeyCache: "0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := newChurnArena(Spec{Pattern: AllocChurn, Options: c.opts})
			if err != nil {
				t.Fatal(err)
			}
			defer a.free()
			tr := &invalidating{}
			unhook := a.hookInvalidation(tr)
			b, err := a.heap.Alloc(64 << 10)
			if err != nil {
				t.Fatal(err)
			}
			addr := sys.AddressOf(b)
			if err := a.heap.Free(b); err != nil {
				t.Fatal(err)
			}
			if len(tr.got) != 1 || tr.got[0] != addr {
				t.Fatalf("invalidations %#x, want one of %#x", tr.got, addr)
			}
			unhook()
			b, err = a.heap.Alloc(64 << 10)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.heap.Free(b); err != nil {
				t.Fatal(err)
			}
			if len(tr.got) != 1 {
				t.Errorf("invalidations after unhooking: %#x", tr.got[1:])
			}
		})
	}
	// Nothing to hook: a transport without invalidation, an arena without allocator.
	a, err := newChurnArena(Spec{Pattern: AllocChurn})
	if err != nil {
		t.Fatal(err)
	}
	defer a.free()
	a.hookInvalidation(struct{ transports.Transport }{})()
	(&arena{}).hookInvalidation(&invalidating{})()
}
