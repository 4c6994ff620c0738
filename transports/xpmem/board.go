package xpmem

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/gotune/gotune/internal/regcache"
	"github.com/gotune/gotune/internal/sys"
)

// The notice board: one page of this rank's memory that its peers attach.
// Word 0 counts the notices ever posted; notice k lives in slot k mod
// boardSlots as two words (start, end) from byte 16 on. The poster writes
// the slot, then the count (a release store); a reader loads the count
// (acquire), reads the new slots, and loads the count again: if the poster
// lapped it meanwhile, the reader drops all its entries of that peer.
const (
	boardBytes = 4096
	boardSlots = (boardBytes - 16) / 16
)

type board struct {
	mu   sync.Mutex // the board's own lock: the only one the safe hook takes
	mem  []byte
	addr uintptr
}

func newBoard() (*board, error) {
	mem, err := sys.MapAnon(boardBytes, true)
	if err != nil {
		return nil, fmt.Errorf("xpmem notice board: %w", err)
	}
	return &board{mem: mem, addr: sys.AddressOf(mem)}, nil
}

// post records that [addr, addr+n) is being released.
func (b *board) post(addr uintptr, n int) {
	b.mu.Lock()
	k := sys.LoadUint64At(b.addr)
	slot := b.addr + 16 + uintptr(k%boardSlots)*16
	sys.StoreUint64At(slot, uint64(addr))
	sys.StoreUint64At(slot+8, uint64(addr)+uint64(n))
	sys.StoreUint64At(b.addr, k+1)
	b.mu.Unlock()
}

func (b *board) close() error { return sys.Unmap(b.mem) }

// peerBoard is this rank's view of a peer's board.
type peerBoard struct {
	remote, local uintptr // the board in the peer, and its attachment here
	seen          uint64  // notices read so far
	slots         []byte  // scratch for reading the peer's slots
}

// read returns the notices posted since the last read, or all=true when
// some were overwritten before they were read.
func (p *peerBoard) read(dev device, pid int) (spans []regcache.Span, all bool, err error) {
	k, err := dev.Load64(pid, p.local, p.remote)
	if err != nil || k == p.seen {
		return nil, false, err
	}
	if k-p.seen >= boardSlots {
		p.seen = k
		return nil, true, nil
	}
	if p.slots == nil {
		p.slots = make([]byte, boardBytes-16)
	}
	if err := dev.Move(pid, p.local+16, p.remote+16, p.slots, true); err != nil {
		return nil, false, err
	}
	for i := p.seen; i < k; i++ {
		o := (i % boardSlots) * 16
		s := *(*uint64)(unsafe.Pointer(&p.slots[o]))
		e := *(*uint64)(unsafe.Pointer(&p.slots[o+8]))
		spans = append(spans, regcache.Span{Start: uintptr(s), End: uintptr(e)})
	}
	again, err := dev.Load64(pid, p.local, p.remote)
	if err != nil {
		return nil, false, err
	}
	start := p.seen
	p.seen = k
	if again-start >= boardSlots { // a poster writes slot again%boardSlots before it counts it
		return nil, true, nil
	}
	return spans, false, nil
}
