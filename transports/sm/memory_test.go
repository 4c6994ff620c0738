package sm_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports/sm"
)

// fakeDevice stands in for GPU memory: every "device" buffer is a
// PROT_NONE mapping, so an engine that touched one with the CPU would
// crash the test, and its bytes live in a host shadow that only the fake's
// copies reach.
type fakeDevice struct {
	bufs   []fakeBuf
	pinned [][]byte // host buffers the fake calls pinned
	// staged counts the fake's copies, to show the staged paths ran.
	toHost, fromHost, single int
}

type fakeBuf struct {
	addr   uintptr
	shadow []byte
}

func (f *fakeDevice) alloc(t *testing.T, n int) []byte {
	t.Helper()
	b, err := sys.MapInaccessible(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Unmap(b) })
	f.bufs = append(f.bufs, fakeBuf{sys.AddressOf(b), make([]byte, n)})
	return b
}

// shadow returns the host bytes behind device bytes b, or nil if b is not
// device memory.
func (f *fakeDevice) shadow(b []byte) []byte {
	return f.shadowAt(sys.AddressOf(b), len(b))
}

func (f *fakeDevice) shadowAt(addr uintptr, n int) []byte {
	for _, d := range f.bufs {
		if addr >= d.addr && addr+uintptr(n) <= d.addr+uintptr(len(d.shadow)) {
			off := int(addr - d.addr)
			return d.shadow[off : off+n]
		}
	}
	return nil
}

// allocPinned returns host memory the fake classifies as pinned.
func (f *fakeDevice) allocPinned(t *testing.T, n int) []byte {
	b := buffer(t, n)
	f.pinned = append(f.pinned, b)
	return b
}

func (f *fakeDevice) Place(b []byte) (sm.Place, error) {
	if f.shadow(b) != nil {
		return sm.PlaceDevice, nil
	}
	addr := sys.AddressOf(b)
	for _, p := range f.pinned {
		if base := sys.AddressOf(p); addr >= base && addr+uintptr(len(b)) <= base+uintptr(len(p)) {
			return sm.PlacePinned, nil
		}
	}
	return sm.PlaceHost, nil
}

func (f *fakeDevice) ToHost(dst, src []byte) error {
	s := f.shadow(src)
	if s == nil || len(dst) != len(src) {
		return fmt.Errorf("ToHost from %d host bytes", len(src))
	}
	f.toHost++
	copy(dst, s)
	return nil
}

func (f *fakeDevice) FromHost(dst, src []byte) error {
	s := f.shadow(dst)
	if s == nil || len(dst) != len(src) {
		return fmt.Errorf("FromHost into %d host bytes", len(dst))
	}
	f.fromHost++
	copy(s, src)
	return nil
}

// fakeIPC is a single copy for device buffers, as CUDA IPC is: pageable
// host sends never take it; it pulls when the sender's buffer is on the
// device (the receiver opens it), pushes from pinned or host memory into a
// device receive, and sends host to host through the fragments.
type fakeIPC struct {
	dev       *fakeDevice
	threshold int
}

func (c *fakeIPC) Name() string                { return "fakeipc" }
func (c *fakeIPC) Pull() bool                  { return true }
func (c *fakeIPC) Rendezvous(int) bool         { return false }
func (c *fakeIPC) DeviceRendezvous(n int) bool { return n >= c.threshold }
func (c *fakeIPC) PinnedRendezvous(n int) bool { return n >= c.threshold }
func (c *fakeIPC) RouteFor(_ int, sender, receiver sm.Place) sm.Route {
	return sm.DeviceRoute(sender, receiver)
}
func (c *fakeIPC) Copy(_ int, local []byte, _ sm.Place, remote uintptr, pull bool) error {
	// One process: the remote address is ours too.
	far := c.dev.shadowAt(remote, len(local))
	if far == nil {
		far = sys.BytesAt(remote, len(local))
	}
	near := c.dev.shadow(local)
	if near == nil {
		near = local
	}
	c.dev.single++
	if pull {
		copy(near, far)
	} else {
		copy(far, near)
	}
	return nil
}

// eventIPC is fakeIPC completing by events (sm.EventCopy): Start copies at
// once, and the copy's event reads finished from its second query on, so
// both sides wait on it at least once.
type eventIPC struct {
	fakeIPC
	mu      sync.Mutex
	last    uint64
	queries map[uint64]int
}

func (c *eventIPC) Start(pid int, local []byte, at sm.Place, remote uintptr, pull bool) (uint64, error) {
	if err := c.Copy(pid, local, at, remote, pull); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last++
	return c.last, nil
}

func (c *eventIPC) Done(_ int, token uint64) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queries == nil {
		c.queries = map[uint64]int{}
	}
	c.queries[token]++
	return c.queries[token] > 1, nil
}

// Every placement of the two buffers (pageable host, pinned host or device
// on either side), at eager, pipelined and single-copy sizes, with early
// arrivals: the bytes arrive, the CPU never touches device memory (it would
// fault), and single copy is never given up.
func TestDeviceBuffersAreStagedNeverTouched(t *testing.T) {
	for _, mode := range []string{"staged", "single", "events"} {
		for _, place := range []string{"H-H", "D-H", "H-D", "D-D", "P-D", "P-H", "P-P", "D-P", "H-P"} {
			t.Run(mode+"/"+place, func(t *testing.T) {
				dev := &fakeDevice{}
				var mech sm.SingleCopy
				switch mode {
				case "single":
					mech = &fakeIPC{dev: dev, threshold: 300}
				case "events":
					mech = &eventIPC{fakeIPC: fakeIPC{dev: dev, threshold: 300}}
				}
				single := mech != nil
				a, b := pairMem(t, small(4, 2), small(4, 2), mech, dev)
				sizes := []int{1, 50, 64, 200, 1000, 5000}
				alloc := func(kind byte, n int) []byte {
					switch kind {
					case 'D':
						return dev.alloc(t, n)
					case 'P':
						return dev.allocPinned(t, n)
					}
					return buffer(t, n)
				}
				sdev, rdev, spinned := place[0] == 'D', place[2] == 'D', place[0] == 'P'
				sends, recvs := make([][]byte, len(sizes)), make([][]byte, len(sizes))
				for i, n := range sizes {
					sends[i], recvs[i] = alloc(place[0], n), alloc(place[2], n)
					want := make([]byte, n)
					fill(want, i+1)
					if s := dev.shadow(sends[i]); s != nil {
						copy(s, want)
					} else {
						copy(sends[i], want)
					}
				}
				burst(t, a, b, sends, recvs) // the second half arrive before their receives
				for i, n := range sizes {
					want := make([]byte, n)
					fill(want, i+1)
					got := dev.shadow(recvs[i])
					if got == nil {
						got = recvs[i]
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("message %d (%d bytes) corrupted", i, n)
					}
				}
				if sdev && dev.toHost == 0 && !single {
					t.Error("device sends never staged")
				}
				if single && sdev && dev.single == 0 {
					t.Error("no single copy for device sends above the threshold")
				}
				if rdev && !(single && (sdev || spinned)) && dev.fromHost == 0 {
					t.Error("device receives never staged")
				}
				if single && spinned && rdev && dev.single == 0 {
					t.Error("no single copy (push) for pinned sends above the threshold")
				}
				if single && !sdev && !rdev && dev.single != 0 {
					t.Errorf("%d single copies between host buffers", dev.single)
				}
				for _, ep := range []*sm.Endpoint{a, b} {
					if f := ep.Fallbacks(); len(f) > 0 {
						t.Errorf("single copy given up: %v", f)
					}
				}
				if ev, ok := mech.(*eventIPC); ok && len(ev.queries) != int(ev.last) {
					t.Errorf("%d copies started, %d waited on", ev.last, len(ev.queries))
				}
			})
		}
	}
}
