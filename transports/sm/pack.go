package sm

// Packing small messages: an Isend of at most packMax bytes with nothing
// queued ahead of it adds the message as a record to an open packed cell,
// visible to the receiver at once (the cell's length word grows with each
// record), and completes. The cell is closed once it holds packPublish
// bytes or cannot take the next record, and at the rank's next call into
// the engine for anything but such an Isend (a wait, a progress pass, a
// blocking call, a receive, another send), before anything else goes into
// the ring. Why: each message in a cell of its own costs the receiver a
// cache miss per message (cells lie a cell size apart, so no prefetcher
// fetches the next one), while a window of small messages fits a few
// consecutive lines of one cell (docs/transports.md, sm: small messages).

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/gotune/gotune/internal/sys"
)

// pack is a peer's pack: whether tx's current cell is open for records,
// the bytes of records in it, and how many messages were packed, ever.
type pack struct {
	open bool
	used int
	sent int
}

// A record is an 8-byte header, the message's length (little-endian), and
// the message padded to 8 bytes.
const recordHeader = 8

// packMax is the largest message packed; packPublish the fill at which a
// pack is closed, so that the ring moves on while the sender is still
// posting a long window.
const (
	packMax     = 256
	packPublish = 1024
)

func recordSize(n int) int { return recordHeader + (n+7)&^7 }

// packable says whether an Isend of buf to p may be packed: host memory,
// small, a record that fits an empty cell (a cell may be as small as the
// eager limit and its header), and nothing to p queued ahead of it.
func (e *Endpoint) packable(p *peer, buf []byte) bool {
	return e.mem == nil && len(buf) <= packMax && len(buf) <= e.params.EagerLimit &&
		recordSize(len(buf)) <= int(p.tx.cellSize)-headerSize &&
		p.sendq.Len() == 0 && len(p.streams) == 0 && p.ctrl.Len() == 0 && p.fallq.Len() == 0
}

// packSend adds buf to p's pack, opening one in tx's next cell, and
// reports false when the ring has no free cell for it.
func (e *Endpoint) packSend(p *peer, buf []byte) bool {
	rec := recordSize(len(buf))
	if p.pack.open && p.pack.used+rec > len(p.tx.cell()) {
		e.closePack(p)
	}
	opening := !p.pack.open
	if opening && !p.tx.cellFree() {
		return false
	}
	body := p.tx.cell()
	if opening {
		p.pack.open, p.pack.used = true, 0
		e.openPacks++
	}
	binary.LittleEndian.PutUint64(body[p.pack.used:], uint64(len(buf)))
	copy(body[p.pack.used+recordHeader:], buf)
	p.pack.used += rec
	p.pack.sent++
	p.msgOut++
	if opening {
		p.tx.openPacked(p.pack.used)
	} else {
		p.tx.growPacked(p.pack.used)
	}
	if p.pack.used >= packPublish {
		e.closePack(p)
	}
	return true
}

// closePack closes p's open pack and reports whether there was one.
func (e *Endpoint) closePack(p *peer) bool {
	if !p.pack.open {
		return false
	}
	p.tx.closePacked(p.pack.used)
	p.pack.open = false
	e.openPacks--
	return true
}

// closePacks closes every open pack; every entry point but a packed Isend
// calls it first. With none open (the common case, and every call after
// the first of one entry point) it costs one compare.
func (e *Endpoint) closePacks() {
	if e.openPacks != 0 {
		e.closeOpenPacks()
	}
}

func (e *Endpoint) closeOpenPacks() {
	for _, p := range e.active {
		if e.closePack(p) && e.openPacks == 0 {
			return
		}
	}
}

// packClosed marks a packed cell's length word once no record follows.
const packClosed = 1 << 31

// records are the records of p's current packed cell published so far,
// and whether the cell is closed.
func (e *Endpoint) records(p *peer, h *cellHeader) ([]byte, bool) {
	w := atomic.LoadUint32(&h.length)
	body, n := p.rx.body(), int(w&^packClosed)
	if n > len(body) {
		panic(fmt.Sprintf("%s: corrupt channel %d->%d: %d bytes of records in a %d-byte cell", e.name, p.rank, e.rank, n, len(body)))
	}
	return body[:n], w&packClosed != 0
}

// record is the message of the record at off in recs, and where the next
// record starts.
func (e *Endpoint) record(p *peer, recs []byte, off int) ([]byte, int) {
	if len(recs)-off < recordHeader {
		panic(fmt.Sprintf("%s: corrupt channel %d->%d: a record's header at %d of %d bytes of records", e.name, p.rank, e.rank, off, len(recs)))
	}
	n := binary.LittleEndian.Uint64(recs[off:])
	if n > uint64(len(recs)-off-recordHeader) {
		panic(fmt.Sprintf("%s: corrupt channel %d->%d: a %d-byte record at %d of %d bytes of records", e.name, p.rank, e.rank, n, off, len(recs)))
	}
	start := off + recordHeader
	return recs[start : start+int(n)], off + recordSize(int(n))
}

// packState is where takePacked left p's current packed cell.
type packState uint8

const (
	packTaken packState = iota // every record taken, the cell released
	packHeld                   // a record no posted receive awaits (and not parking)
	packOpen                   // every record published so far taken; the cell is still open
)

// takePacked delivers the records of p's current packed cell from where
// the last pass stopped, and reports whether it delivered any and where
// it stopped. A record no posted receive awaits stops it unless park.
func (e *Endpoint) takePacked(p *peer, h *cellHeader, park bool) (bool, packState) {
	took := false
	for {
		recs, closed := e.records(p, h)
		if p.rx.packOff >= len(recs) {
			if p.rx.releasePacked(len(recs), closed) {
				return took, packTaken
			}
			if !took {
				openPause()
			}
			return took, packOpen
		}
		if !park && p.recvq.Len() == 0 {
			return took, packHeld
		}
		msg, next := e.record(p, recs, p.rx.packOff)
		e.deliverEager(p, msg)
		p.rx.packOff = next
		took = true
	}
}

// recvPacked is a blocking receive's look at p's current packed cell:
// the next record into buf (n, ok), or nothing yet (ok false, fits true:
// poll again), or a record that does not fit buf (fits false: the general
// path takes it). A closed cell whose records are all taken is released
// on the way.
func (e *Endpoint) recvPacked(p *peer, h *cellHeader, buf []byte) (n int, ok, fits bool) {
	recs, closed := e.records(p, h)
	if p.rx.packOff >= len(recs) {
		if !p.rx.releasePacked(len(recs), closed) {
			openPause()
		}
		return 0, false, true
	}
	msg, next := e.record(p, recs, p.rx.packOff)
	if len(msg) > len(buf) {
		return 0, false, false
	}
	n = copy(buf, msg)
	p.rx.packOff = next
	recs, closed = e.records(p, h)
	p.rx.releasePacked(len(recs), closed)
	return n, true, true
}

// openPause backs a receiver off an open packed cell it has taken every
// record of: its polls of the cell's length word would take the line back
// from the sender at every record it adds, one transfer a message, while
// a sender left alone for a moment adds several records a transfer.
func openPause() {
	for range openPauses {
		sys.CPURelax()
	}
}

// openPauses is openPause's length in PAUSEs: with one, a stream's message
// rate still fell to a cell per message's in some runs; four held it
// (development VM, docs/performance.md).
const openPauses = 4
