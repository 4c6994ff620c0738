package cudaipc

import (
	"fmt"
	"time"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports/sm"
)

// copier is the CUDA IPC single copy (sm.SingleCopy): the side that can
// open the other's device memory copies with one cuMemcpyAsync.
type copier struct {
	p      Params
	self   int // this rank
	dev    *cuda.Device
	stream *cuda.Stream
	tables []*table     // by rank
	rankOf map[int]int  // pid -> rank
	opened []*openCache // by rank
	kernel *smCopy      // the SM copy (cudaipc.copy=sm); nil: copy engines
	relay  *relay       // the relay block (cudaipc.relay); nil: none
}

// openCache keeps a peer's opened allocations, least recently used last.
type openCache struct {
	limit int
	maps  []opened
}

type opened struct {
	id  uint64 // the allocation's buffer id, unique in the peer's process
	buf *cuda.Buffer
}

func (c *copier) Name() string { return "cudaipc" }

// Pull is the default direction; RouteFor decides per message.
func (c *copier) Pull() bool { return true }

// Rendezvous: host messages never take CUDA IPC (sm's copy-in/copy-out).
func (c *copier) Rendezvous(int) bool { return false }

// DeviceRendezvous: device messages from the threshold up do.
func (c *copier) DeviceRendezvous(n int) bool { return n >= c.p.Threshold }

// PinnedRendezvous: pinned host sends from the pinned threshold up offer
// the receiver a single copy (a push, if its buffer is device memory).
func (c *copier) PinnedRendezvous(n int) bool { return n >= c.p.PinnedThreshold }

// RouteFor: CUDA IPC opens device memory only (sm.DeviceRoute).
func (c *copier) RouteFor(_ int, sender, receiver sm.Place) sm.Route {
	return sm.DeviceRoute(sender, receiver)
}

// Copy moves len(local) bytes between local and the peer's device memory
// at remote, which the peer exported in its table before naming it, and
// returns when they have moved (cudaipc.completion=sync).
func (c *copier) Copy(pid int, local []byte, at sm.Place, remote uintptr, pull bool) error {
	if err := c.enqueue(pid, local, at, remote, pull); err != nil {
		return err
	}
	return c.stream.Synchronize()
}

// enqueue queues Copy's copy on the copier's stream.
func (c *copier) enqueue(pid int, local []byte, at sm.Place, remote uintptr, pull bool) error {
	dst, src, err := c.ends(pid, local, remote, pull)
	if err != nil {
		return err
	}
	return c.queue(dst, src, len(local), at)
}

// queue queues the copy of n bytes from src to dst, both addresses in this
// process, on the copier's stream: by the copy kernel when cudaipc.copy=sm
// and both sides are device memory it can address in vectors, else by a
// copy engine.
func (c *copier) queue(dst, src uintptr, n int, at sm.Place) error {
	if c.kernel != nil && at == sm.PlaceDevice && aligned(dst, src) {
		return c.kernel.launch(dst, src, n, c.stream)
	}
	return cuda.CopyAsync(dst, src, n, c.stream)
}

// ends are the addresses a copy between local and the peer's device bytes
// at remote writes and reads, in this process.
func (c *copier) ends(pid int, local []byte, remote uintptr, pull bool) (dst, src uintptr, err error) {
	rank, ok := c.rankOf[pid]
	if !ok {
		return 0, 0, fmt.Errorf("cudaipc: no rank has pid %d", pid)
	}
	far, err := c.open(rank, remote, len(local))
	if err != nil {
		return 0, 0, err
	}
	near := sys.AddressOf(local)
	if pull {
		return near, far, nil
	}
	return far, near, nil
}

// open returns the local address of the peer's device bytes at remote.
func (c *copier) open(rank int, remote uintptr, n int) (uintptr, error) {
	e, ok := c.tables[rank].find(remote, n)
	if !ok {
		return 0, fmt.Errorf("cudaipc: rank %d exported no device allocation holding %d bytes at %#x", rank, n, remote)
	}
	oc := c.opened[rank]
	for i, o := range oc.maps {
		if o.id == e.id {
			if i > 0 { // most recently used first
				copy(oc.maps[1:i+1], oc.maps[:i])
				oc.maps[0] = o
			}
			return o.buf.Ptr() + (remote - uintptr(e.base)), nil
		}
	}
	buf, err := c.dev.OpenIPC(e.handle, int(e.size))
	if err != nil {
		return 0, fmt.Errorf("cudaipc: open rank %d's allocation %#x (%s): %w", rank, e.base, cuda.Size(int(e.size)), err)
	}
	if oc.limit > 0 && len(oc.maps) >= oc.limit {
		// A copy still in flight, on the stream or by the relay, may
		// read or write through the mapping to close.
		if err := c.stream.Synchronize(); err != nil {
			return 0, fmt.Errorf("cudaipc: wait for copies before closing a mapping: %w", err)
		}
		if c.relay != nil {
			if err := c.relay.drain(time.Now().Add(relayStopWait)); err != nil {
				return 0, fmt.Errorf("cudaipc: wait for relayed copies before closing a mapping: %w", err)
			}
		}
		last := oc.maps[len(oc.maps)-1]
		oc.maps = oc.maps[:len(oc.maps)-1]
		if err := last.buf.Free(); err != nil {
			return 0, fmt.Errorf("cudaipc: close rank %d's mapping: %w", rank, err)
		}
	}
	oc.maps = append([]opened{{id: e.id, buf: buf}}, oc.maps...)
	return buf.Ptr() + (remote - uintptr(e.base)), nil
}

// close waits for the copies in flight, then unmaps every opened
// allocation and unloads the copy kernel.
func (c *copier) close() error {
	first := c.stream.Synchronize()
	if err := c.kernel.close(); err != nil && first == nil {
		first = err
	}
	for _, oc := range c.opened {
		for _, o := range oc.maps {
			if err := o.buf.Free(); err != nil && first == nil {
				first = err
			}
		}
		oc.maps = nil
	}
	return first
}
