package cudaipc

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gotune/gotune/internal/cuda"
)

// Each rank publishes the IPC handles of the device allocations it sends
// from or receives into in a table of its own in the job's shared segment:
// a count line, then fixed entries, appended by the owner alone and read by
// every peer, then the handles of the rank's completion events (written
// once, when the rank starts, before it can name one in a FIN). An entry is written before the count that covers it is
// stored (release), and the RTS or CTS that names an address in it is
// published after that, so a peer that sees the message sees the entry.

const (
	tableEntries = 256
	entryBytes   = 128
	tableHeader  = 64
	eventSlots   = 64 // completion events per rank, recorded in turn
	tableBytes   = tableHeader + tableEntries*entryBytes + eventSlots*cuda.IPCHandleSize
)

type entry struct {
	base, size, id uint64
	handle         cuda.IPCMemHandle
	_              [entryBytes - 24 - cuda.IPCHandleSize]byte
}

// table is one rank's handle table as mapped in this process.
type table struct {
	count   *uint64
	entries *[tableEntries]entry
	events  *[eventSlots]cuda.IPCEventHandle
}

func tableAt(b []byte) (*table, error) {
	if len(b) < tableBytes {
		return nil, fmt.Errorf("cudaipc: handle table needs %d bytes, have %d", tableBytes, len(b))
	}
	return &table{
		count:   (*uint64)(unsafe.Pointer(&b[0])),
		entries: (*[tableEntries]entry)(unsafe.Pointer(&b[tableHeader])),
		events:  (*[eventSlots]cuda.IPCEventHandle)(unsafe.Pointer(&b[tableHeader+tableEntries*entryBytes])),
	}, nil
}

// publish appends an allocation's handle (owner only).
func (t *table) publish(a cuda.Allocation, h cuda.IPCMemHandle) error {
	n := atomic.LoadUint64(t.count)
	if n >= tableEntries {
		return fmt.Errorf("cudaipc: handle table full: %d device allocations exported", tableEntries)
	}
	t.entries[n] = entry{base: uint64(a.Base), size: uint64(a.Size), id: a.BufferID, handle: h}
	atomic.StoreUint64(t.count, n+1)
	return nil
}

// find returns the newest entry holding [addr, addr+n) and its index. An
// address freed and allocated again is found in its newest allocation.
func (t *table) find(addr uintptr, n int) (entry, int, bool) {
	for i := int(atomic.LoadUint64(t.count)) - 1; i >= 0; i-- {
		e := &t.entries[i] // published entries never change
		if uint64(addr) >= e.base && uint64(addr)+uint64(n) <= e.base+e.size {
			return *e, i, true
		}
	}
	return entry{}, -1, false
}
