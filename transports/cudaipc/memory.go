package cudaipc

import (
	"fmt"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports/sm"
)

// memory tells the sm engine which buffers are GPU memory and stages them
// through its cells and fragments (sm.Memory).
type memory struct {
	spans  []span // buffers classified before, newest first
	own    *table
	stream *cuda.Stream // non-blocking: staging in async mode, single copies
	sync   bool         // staging on the legacy stream (hazard H4's coupling)
}

// span is an address range known to be host memory (pageable or pinned),
// or a device allocation exported under its buffer id as entry k of the
// rank's table.
type span struct {
	base, end uintptr
	place     sm.Place
	id, k     uint64
}

// maxSpans bounds the classification cache; older spans are asked again.
const maxSpans = 64

// Place classifies b, exporting a device allocation's IPC handle the first
// time. Managed memory counts as pageable host memory: the CPU may touch
// it (the driver migrates the pages). Page-locked host memory the driver
// knows (cuMemHostAlloc, cuMemHostRegister) is pinned: a peer's device
// memory can be copied into from it in one DMA.
func (m *memory) Place(b []byte) (sm.Place, error) {
	addr := sys.AddressOf(b)
	end := addr + uintptr(len(b))
	for i, s := range m.spans {
		if addr < s.base || end > s.end {
			continue
		}
		if s.place != sm.PlaceDevice {
			return s.place, nil
		}
		// The same address may be a new allocation since (freed and
		// allocated again): its buffer id tells. Its entry may have been
		// overwritten by newer ones: then it is exported again.
		if id, err := cuda.BufferID(addr); err == nil && id == s.id {
			if e, ok := m.own.read(s.k); ok && e.id == id {
				return sm.PlaceDevice, nil
			}
		}
		m.spans = append(m.spans[:i], m.spans[i+1:]...)
		break
	}
	info, err := cuda.PointerAttributes(addr)
	if err != nil {
		return sm.PlaceHost, fmt.Errorf("classify buffer %#x: %w", addr, err)
	}
	switch {
	case info.Type == cuda.MemoryHost && !info.Managed:
		// Pinned ranges end where the buffer does: a neighbour may be pageable.
		m.remember(span{base: addr, end: end, place: sm.PlacePinned})
		return sm.PlacePinned, nil
	case info.Type != cuda.MemoryDevice || info.Managed:
		m.remember(span{base: addr, end: end})
		return sm.PlaceHost, nil
	}
	a, err := cuda.AllocationOf(addr)
	if err != nil {
		return sm.PlaceHost, err
	}
	s := span{base: a.Base, end: a.Base + uintptr(a.Size), place: sm.PlaceDevice, id: a.BufferID}
	if e, ok := m.own.find(a.Base, a.Size); ok && e.base == uint64(a.Base) && e.id == a.BufferID {
		s.k = e.k // exported before, then forgotten by the cache
	} else {
		h, err := cuda.IPCHandleOf(a.Base)
		if err != nil {
			return sm.PlaceHost, fmt.Errorf("export device buffer %#x: %w", addr, err)
		}
		s.k = m.own.publish(a, h)
	}
	m.remember(s)
	return sm.PlaceDevice, nil
}

func (m *memory) remember(s span) {
	if len(m.spans) == maxSpans {
		m.spans = m.spans[:maxSpans-1]
	}
	m.spans = append(m.spans, span{})
	copy(m.spans[1:], m.spans)
	m.spans[0] = s
}

// ToHost stages device memory src into dst (a cell or fragment).
func (m *memory) ToHost(dst, src []byte) error {
	if m.sync {
		return cuda.CopyDtoH(dst, sys.AddressOf(src))
	}
	return m.copyAndWait(dst, src)
}

// FromHost stages src (a cell or fragment) into device memory dst.
func (m *memory) FromHost(dst, src []byte) error {
	if m.sync {
		return cuda.CopyHtoD(sys.AddressOf(dst), src)
	}
	return m.copyAndWait(dst, src)
}

// copyAndWait copies on the non-blocking stream and waits for that stream
// alone: the copy never queues behind kernels on other streams.
func (m *memory) copyAndWait(dst, src []byte) error {
	if err := cuda.CopyAsync(sys.AddressOf(dst), sys.AddressOf(src), len(src), m.stream); err != nil {
		return err
	}
	return m.stream.Synchronize()
}
