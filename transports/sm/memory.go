package sm

import (
	"fmt"

	"github.com/gotune/gotune/transports"
)

// Memory lets the engine carry messages in buffers the CPU must not touch:
// GPU memory. The engine never copies such a buffer itself. Eager and
// pipelined messages are staged through Memory's copies into and out of its
// cells and fragments, and a SingleCopy mechanism moves rendezvous messages
// (CUDA IPC, say).
type Memory interface {
	// Place reports where b lives: PlaceDevice when the CPU must not touch
	// it. The engine asks once per request, when it is posted; the answer
	// may also prepare b for a peer's single copy (export an IPC handle,
	// say), and an error fails the request.
	Place(b []byte) (Place, error)
	// ToHost copies device memory src into host memory dst, which is as
	// long; FromHost copies host memory src into device memory dst.
	ToHost(dst, src []byte) error
	FromHost(dst, src []byte) error
}

// Place is where a message buffer lives, as a Memory classifies it. It
// travels in the fourth word of an RTS cell.
type Place uint8

const (
	// PlaceHost is host memory the engine copies itself.
	PlaceHost Place = iota
	// PlaceDevice is memory the CPU must not touch (GPU memory).
	PlaceDevice
	// PlacePinned is host memory a GPU can reach by DMA (page-locked and
	// known to the driver): the CPU may touch it, and a GPU mechanism may
	// copy between it and a peer's device memory in one step.
	PlacePinned
)

// DeviceRouter is implemented by a SingleCopy that decides which messages
// in device buffers it moves. Without it, every device message larger than
// the eager limit goes by single copy.
type DeviceRouter interface {
	DeviceRendezvous(n int) bool
}

// PinnedRouter is implemented by a SingleCopy that also offers rendezvous
// for sends from pinned host buffers of n bytes (larger than the eager
// limit): the sender cannot know whether the receive is in device memory,
// so the receiver's Route decides how the message moves.
type PinnedRouter interface {
	PinnedRendezvous(n int) bool
}

// Route is how a rendezvous message moves, chosen by the receiver.
type Route uint8

const (
	RoutePull      Route = iota // the receiver copies from the sender's buffer
	RoutePush                   // the sender copies into the receiver's buffer
	RouteFragments              // this message streams through the fragments; single copy stays on
	// RouteSplit: the receiver copies the message's first part from the
	// sender's buffer while the sender copies the rest into the receiver's,
	// so two cores copy one message (the sender is waiting anyway). The
	// engine pulls instead until a pull from that peer has succeeded, and
	// for handles, events and messages too short to share.
	RouteSplit
)

// Router is implemented by a SingleCopy that picks the route per message,
// from an n-byte message's size and where the two buffers live: a GPU
// mechanism must copy from the side that can open the other's memory and
// cannot move host to host memory; a profile's ranges may pull at some
// sizes and push at others.
type Router interface {
	RouteFor(n int, sender, receiver Place) Route
}

// DeviceRoute is the route for a mechanism that can open only device
// memory, as CUDA IPC: the receiver opens a device sender's buffer (pull);
// a host or pinned sender into a device receive writes into the
// receiver's opened buffer (push); host to host it cannot move at all, so
// the message streams through the fragments.
func DeviceRoute(sender, receiver Place) Route {
	switch {
	case sender == PlaceDevice:
		return RoutePull
	case receiver == PlaceDevice:
		return RoutePush
	}
	return RouteFragments
}

// NewWithMemory is New for buffers that may be device memory.
func NewWithMemory(env transports.Env, p Params, single SingleCopy, mem Memory, name string) (*Endpoint, error) {
	e, err := New(env, p, single, name)
	if err != nil {
		return nil, err
	}
	if mem != nil {
		e.mem = mem
		// A DeviceRouter may send device messages of any size by
		// rendezvous: no eager-only traffic to start lazily for.
		if e.dormant {
			e.wakeProgress() // needsProgress keeps it awake
		}
	}
	return e, nil
}

// classify marks r as a device request where the Memory says so; it
// reports false, having failed r, when the Memory refused the buffer. Only
// endpoints with a Memory call it: host-only paths stay as they were.
func (e *Endpoint) classify(r *request) bool {
	if len(r.buf) == 0 {
		return true
	}
	place, err := e.mem.Place(r.buf)
	if err != nil {
		r.complete(0, fmt.Errorf("%s: %s: %w", e.name, r.describe(), err))
		return false
	}
	r.place = place
	return true
}

// putDevice stages device bytes src of r into the engine's memory dst (a
// cell or a fragment) and returns how many it copied.
func (e *Endpoint) putDevice(r *request, dst, src []byte) int {
	n := min(len(dst), len(src))
	if err := e.mem.ToHost(dst[:n], src[:n]); err != nil {
		e.stagingFailed(r, "from", err)
	}
	return n
}

// getDevice stages the engine's memory src (a cell or a fragment) into
// r's device bytes dst and returns how many it copied.
func (e *Endpoint) getDevice(r *request, dst, src []byte) int {
	n := min(len(dst), len(src))
	if err := e.mem.FromHost(dst[:n], src[:n]); err != nil {
		e.stagingFailed(r, "into", err)
	}
	return n
}

// stagingFailed makes a failed device copy terminal: the channel may hold
// part of the message already, so no later message on it could be trusted.
func (e *Endpoint) stagingFailed(r *request, dir string, err error) {
	err = fmt.Errorf("%s: %s: staging copy %s device memory: %w", e.name, r.describe(), dir, err)
	e.Abort(err)
}

// device reports whether r's buffer is memory the CPU must not touch.
func (r *request) device() bool { return r.place == PlaceDevice }

// pinnedRendezvous reports whether a send of n bytes from a pinned host
// buffer goes by rendezvous, for the receiver to route.
func (e *Endpoint) pinnedRendezvous(p *peer, n int) bool {
	r, ok := e.single.(PinnedRouter)
	return ok && !p.noSingle && n > e.params.EagerLimit && r.PinnedRendezvous(n)
}

// deviceProto routes a send from device memory: single copy where the
// mechanism takes it, else staged through a cell or the fragments.
func (e *Endpoint) deviceProto(p *peer, n int) proto {
	single := e.single != nil && !p.noSingle
	if r, ok := e.single.(DeviceRouter); ok && single {
		if r.DeviceRendezvous(n) {
			return protoRendezvous
		}
	} else if single && n > e.params.EagerLimit {
		return protoRendezvous
	}
	if n <= e.params.EagerLimit {
		return protoEager
	}
	return protoPipeline
}
