package sm

// Packing small messages: an Isend of at most packMax bytes with nothing
// queued ahead of it adds the message to an open cell as a record, and
// the cell is published once it holds packPublish bytes, cannot take the
// next record, or the rank calls into the engine for anything but such an
// Isend (a wait, a progress pass, a blocking call, a receive, another
// send). Why: each message in a cell of its own costs the receiver a
// cache miss per message (cells lie a cell size apart, so no prefetcher
// fetches the next one), while a window of small messages fits a few
// consecutive lines of one cell (docs/transports.md, sm: small messages).

import (
	"encoding/binary"
	"fmt"
)

// pack is a peer's pack: whether tx's current cell is open for records,
// the bytes of records in it, and whether the peer is in Endpoint.packing.
type pack struct {
	open, listed bool
	used         int
	sent         int // messages packed, ever
}

// A record is an 8-byte header, the message's length (little-endian), and
// the message padded to 8 bytes.
const recordHeader = 8

// packMax is the largest message packed; packPublish the fill at which a
// pack is published without waiting for the rank's next call, so that the
// receiver starts on a long window while the sender is still posting it.
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
		e.publishPack(p)
	}
	if !p.pack.open {
		if !p.tx.cellFree() {
			return false
		}
		p.pack.open, p.pack.used = true, 0
		if !p.pack.listed {
			p.pack.listed = true
			e.packing = append(e.packing, p)
		}
	}
	body := p.tx.cell()[p.pack.used:]
	binary.LittleEndian.PutUint64(body, uint64(len(buf)))
	copy(body[recordHeader:], buf)
	p.pack.used += rec
	p.pack.sent++
	p.msgOut++
	if p.pack.used >= packPublish {
		e.publishPack(p)
	}
	return true
}

// publishPack publishes p's open pack and reports whether there was one.
func (e *Endpoint) publishPack(p *peer) bool {
	if !p.pack.open {
		return false
	}
	p.tx.publish(kindPacked, p.pack.used)
	p.pack.open = false
	return true
}

// publishPacks publishes every open pack; every entry point but a packed
// Isend calls it first, so no message waits for its sender's next Isend.
func (e *Endpoint) publishPacks() {
	if len(e.packing) == 0 {
		return
	}
	for _, p := range e.packing {
		e.publishPack(p)
		p.pack.listed = false
	}
	clear(e.packing)
	e.packing = e.packing[:0]
}

// records are the records of a packed cell from p's ring: the cell's body
// up to the header's length.
func (e *Endpoint) records(p *peer, h *cellHeader) []byte {
	body := p.rx.body()
	if int(h.length) > len(body) {
		panic(fmt.Sprintf("%s: corrupt channel %d->%d: %d bytes of records in a %d-byte cell", e.name, p.rank, e.rank, h.length, len(body)))
	}
	return body[:h.length]
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

// takePacked delivers the records of p's current packed cell from where
// the last pass stopped. A record no posted receive awaits ends the pass
// unless park; it reports whether the whole cell was taken (and released).
func (e *Endpoint) takePacked(p *peer, h *cellHeader, park bool) bool {
	recs := e.records(p, h)
	for p.rx.packOff < len(recs) {
		if !park && p.recvq.Len() == 0 {
			return false
		}
		msg, next := e.record(p, recs, p.rx.packOff)
		e.deliverEager(p, msg)
		p.rx.packOff = next
	}
	p.rx.packOff = 0
	p.rx.release()
	return true
}

// recvPacked takes the next record of p's current packed cell into buf for
// a blocking receive; ok false leaves it for the general path (it does not
// fit buf).
func (e *Endpoint) recvPacked(p *peer, h *cellHeader, buf []byte) (int, bool) {
	recs := e.records(p, h)
	msg, next := e.record(p, recs, p.rx.packOff)
	if len(msg) > len(buf) {
		return 0, false
	}
	n := copy(buf, msg)
	if next >= len(recs) {
		p.rx.packOff = 0
		p.rx.release()
	} else {
		p.rx.packOff = next
	}
	return n, true
}
