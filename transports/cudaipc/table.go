package cudaipc

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gotune/gotune/internal/cuda"
)

// Each rank publishes the IPC handles of the device allocations it sends
// from or receives into in a table of its own in the job's shared segment:
// a count line, a line holding the rank's completion flag (written by its
// GPU, cudaipc.completion=flag), a line holding its relay's done word
// (written by its relay block, cudaipc.relay), then a ring of entries,
// written by the owner alone and read by every peer, then the handles of
// the rank's completion events (written once, when the rank starts,
// before it can name one in a FIN).
//
// Entry k (the k-th published, from 0) lives in slot k mod tableEntries and
// carries k in its first word, which works as a sequence lock: the owner
// invalidates it, writes the rest, stores k again, and only then the count
// that covers k (all stores atomic). A reader takes an entry only when the
// word reads k before and after it copies the rest, so it never uses a
// torn entry or one overwritten by a newer allocation. The RTS or CTS that
// names an address is published after the entry holding it, so a peer that
// sees the message finds the entry, unless tableEntries newer allocations
// were exported in between; the lookup then fails with an error. The
// owner exports an allocation again when its entry has been overwritten.

const (
	tableEntries = 256
	entryBytes   = 128
	tableHeader  = 192 // the count's line, the flag's, the relay's
	flagOffset   = 64
	relayOffset  = 128
	eventSlots   = 64 // completion events per rank, recorded in turn
	tableBytes   = tableHeader + tableEntries*entryBytes + eventSlots*cuda.IPCHandleSize
)

// entryWords is how many 8-byte words an entry holds: its number, base,
// size and buffer id, then the handle.
const entryWords = 4 + cuda.IPCHandleSize/8

// entry is one published allocation as a reader copies it.
type entry struct {
	k              uint64 // its number
	base, size, id uint64
	handle         cuda.IPCMemHandle
}

// table is one rank's handle table as mapped in this process.
type table struct {
	count   *uint64
	flag    *uint32
	relay   *uint64 // the rank's relay's done word
	entries *[tableEntries][entryBytes / 8]uint64
	events  *[eventSlots]cuda.IPCEventHandle
}

// invalid is what an entry's number reads while the owner rewrites it.
const invalid = ^uint64(0)

func tableAt(b []byte) (*table, error) {
	if len(b) < tableBytes {
		return nil, fmt.Errorf("cudaipc: handle table needs %d bytes, have %d", tableBytes, len(b))
	}
	return &table{
		count:   (*uint64)(unsafe.Pointer(&b[0])),
		flag:    (*uint32)(unsafe.Pointer(&b[flagOffset])),
		relay:   (*uint64)(unsafe.Pointer(&b[relayOffset])),
		entries: (*[tableEntries][entryBytes / 8]uint64)(unsafe.Pointer(&b[tableHeader])),
		events:  (*[eventSlots]cuda.IPCEventHandle)(unsafe.Pointer(&b[tableHeader+tableEntries*entryBytes])),
	}, nil
}

// publish appends an allocation's handle (owner only), overwriting the
// oldest entry once the ring is full, and returns the entry's number.
func (t *table) publish(a cuda.Allocation, h cuda.IPCMemHandle) uint64 {
	k := atomic.LoadUint64(t.count)
	w := &t.entries[k%tableEntries]
	atomic.StoreUint64(&w[0], invalid)
	atomic.StoreUint64(&w[1], uint64(a.Base))
	atomic.StoreUint64(&w[2], uint64(a.Size))
	atomic.StoreUint64(&w[3], a.BufferID)
	for i := range cuda.IPCHandleSize / 8 {
		atomic.StoreUint64(&w[4+i], binary.LittleEndian.Uint64(h[8*i:]))
	}
	atomic.StoreUint64(&w[0], k)
	atomic.StoreUint64(t.count, k+1)
	return k
}

// read copies entry k, reporting false if it is being rewritten or has
// been overwritten by a newer one.
func (t *table) read(k uint64) (entry, bool) {
	w := &t.entries[k%tableEntries]
	if atomic.LoadUint64(&w[0]) != k {
		return entry{}, false
	}
	var words [entryWords]uint64
	for i := 1; i < entryWords; i++ {
		words[i] = atomic.LoadUint64(&w[i])
	}
	if atomic.LoadUint64(&w[0]) != k {
		return entry{}, false
	}
	e := entry{k: k, base: words[1], size: words[2], id: words[3]}
	for i := range cuda.IPCHandleSize / 8 {
		binary.LittleEndian.PutUint64(e.handle[8*i:], words[4+i])
	}
	return e, true
}

// find returns the newest entry holding [addr, addr+n). An address freed
// and allocated again is found in its newest allocation.
func (t *table) find(addr uintptr, n int) (entry, bool) {
	count := atomic.LoadUint64(t.count)
	oldest := uint64(0)
	if count > tableEntries {
		oldest = count - tableEntries
	}
	for k := count; k > oldest; k-- {
		e, ok := t.read(k - 1)
		if ok && uint64(addr) >= e.base && uint64(addr)+uint64(n) <= e.base+e.size {
			return e, true
		}
	}
	return entry{}, false
}
