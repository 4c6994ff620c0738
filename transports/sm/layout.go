package sm

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gotune/gotune/internal/sys"
)

const (
	cacheLine  = 64
	headerSize = 16  // cellHeader
	ctlSize    = 128 // consumer line plus the adjacent line, against prefetch sharing
)

// Params shape the channels. All sizes are bytes.
type Params struct {
	Depth      int // cells per channel
	CellSize   int // bytes per cell, header included; a multiple of 64
	EagerLimit int // largest message sent inline; at most CellSize-16
	FragSize   int // largest fragment in bytes; a multiple of 64
	FragSlots  int // fragment ring size in largest fragments: the ring holds FragSlots*FragSize bytes
	// Copy selects the routine that copies fragments into the ring and out
	// of it: "go" (Go's vector loop), "movsb" (REP MOVSB), or "auto" (by
	// size and direction, see copier.go).
	Copy string
	// StreamMin is the message size from which the receiver copies the
	// fragments of a message arriving alone (not taking turns with others,
	// see Streams) to the receive buffer with streaming (non-temporal)
	// stores, so that a destination larger than the cache does not evict
	// the source and the fragment ring; 0 never streams.
	StreamMin int
	// Wrap is how much of the fragment ring large fragments (those of at
	// least FragSize or WrapFrom bytes, whichever is less) cycle through:
	// the first Wrap bytes. Shorter fragments use the whole ring. 0 (or at
	// least the ring's size) is the whole ring. See DefaultWrap.
	Wrap int
	// Streams is how many pipelined sends to one peer advance together,
	// one fragment each in turn, oldest first (1: one message at a time).
	// See DefaultStreams.
	Streams int
	// NoDrainOnSend makes a send blocked on a full ring stop draining the
	// incoming channels: the deadlock of hazard H5, kept so that the probe
	// can prove its detector works. Never set it for real traffic.
	NoDrainOnSend bool
	// Progress is "poll" (channels advance only inside engine calls; "" is
	// the same) or "thread": a progress goroutine on its own OS thread also
	// advances them while the application is away from the engine.
	Progress string
	// LeakPersistent makes freeing a persistent send forget to return its
	// credit: hazard H3's leak (nccl#1251's shape), kept so that the probe
	// can prove its detector works. Never set it for real traffic.
	LeakPersistent bool
}

// DefaultStreamMin is the built-in sm.stream: messages of 16 MiB and more
// that arrive alone are copied out with streaming stores (see copyOut).
// Why: streaming stores run at what memory takes from one core, faster
// than ordinary stores for a 16 MiB message, while an 8 MiB message's
// source and destination still fit the caches.
const DefaultStreamMin = 16 << 20

// DefaultFragSlots makes the built-in fragment ring 4 MiB (64 fragments of
// 64 KiB): room for a whole 64-message window of 32 KiB (OSU's bw window)
// and for a 64 KiB one to stream without the sender waiting on every
// fragment. Why: smaller rings lose at 32 KiB in the fast phase
// (docs/transports.md, sm: fragments). The cost is shared memory: two ranks map
// 2 x 4.3 MiB; n ranks n(n-1) x 4.3 MiB, so jobs of many ranks set
// sm.frags (or load a profile, whose sweep sizes the ring).
const DefaultFragSlots = 64

// DefaultWrap is the built-in sm.wrap: large messages cycle through the
// first 1 MiB of the ring, which stays in the caches, while windows of
// small messages still get all of it. Why: small messages want the whole
// 4 MiB ring and large ones a cached 1 MiB (docs/transports.md, sm: fragments).
const DefaultWrap = 1 << 20

// DefaultStreams is the built-in sm.streams: up to 64 pipelined sends
// (OSU's window) advance together, one fragment each in turn, as Open
// MPI's ob1 advances the sends it has pending. A window of large messages
// from one buffer into one buffer then copies the same fragment's worth of
// source and destination 64 times in a row, from the caches, where one
// message at a time sweeps both buffers once per message and, at 16 MiB,
// misses the caches.
const DefaultStreams = 64

// WrapFrom is the fragment length from which fragments cycle through
// sm.wrap even when the fragment size is larger. Why: with 128 KiB
// fragments a 64 KiB message is one short fragment, and windows of them
// walking the whole ring lose against the built-in geometry, a loss a
// tuner's fragment stage can miss between the sizes it measures.
const WrapFrom = 64 << 10

// CellSlack is the unused room the built-in cell size leaves after the
// largest eager message: CellFor(eager) = header + eager, rounded up to a
// cache line, plus CellSlack; it costs Depth x CellSlack bytes per channel.
// Why: a message that fills its cell to the last line is slower, because
// the receiver's sequential reads run the prefetchers into the next cell,
// which the sender is about to write (docs/transports.md, sm: channels).
const CellSlack = 8 * cacheLine

// CellFor is the built-in cell size for an eager limit.
func CellFor(eager int) int { return sys.RoundUp(headerSize+eager, cacheLine) + CellSlack }

// DefaultParams are the built-in channel parameters.
func DefaultParams() Params {
	return Params{Depth: 64, CellSize: CellFor(4096), EagerLimit: 4096, FragSize: 64 << 10, FragSlots: DefaultFragSlots,
		Copy: "auto", StreamMin: DefaultStreamMin, Wrap: DefaultWrap, Streams: DefaultStreams, Progress: "poll"}
}

// wrapBytes is the part of the ring full-size fragments use.
func (p Params) wrapBytes() int {
	ring := p.FragSlots * p.FragSize
	if p.Wrap <= 0 || p.Wrap >= ring {
		return ring
	}
	return p.Wrap
}

// ChannelBytes is the shared memory one directed channel occupies.
func (p Params) ChannelBytes() int {
	cells := sys.RoundUp(ctlSize+p.Depth*p.CellSize, sys.PageSize)
	return cells + sys.RoundUp(p.FragSlots*p.FragSize, sys.PageSize)
}

// SegmentBytes is the shared memory n ranks need: one channel per ordered
// pair, so it grows with n².
func (p Params) SegmentBytes(n int) int { return n * (n - 1) * p.ChannelBytes() }

func channelIndex(src, dst, n int) int {
	if dst > src {
		dst--
	}
	return src*(n-1) + dst
}

// channel is one directed ring as mapped in this process.
type channel struct {
	tail     *uint64 // cells consumed (written by the consumer)
	fragTail *uint64 // fragment ring bytes consumed, padding included (written by the consumer)
	awaited  *uint64 // receives the consumer has posted for this channel's messages, ever (written by the consumer)
	cells    []byte
	frags    []byte
	depth    uint64
	cellSize uint64
	fragSize uint64
	wrap     uint64 // where large fragments wrap: Params.Wrap, at most the ring
	wrapFrom uint64 // the length from which a fragment is large: min(FragSize, WrapFrom)
}

func openChannel(seg []byte, src, dst, n int, p Params) (*channel, error) {
	size := p.ChannelBytes()
	off := channelIndex(src, dst, n) * size
	if off+size > len(seg) {
		return nil, fmt.Errorf("channel %d->%d: segment of %d bytes too small (need %d)", src, dst, len(seg), p.SegmentBytes(n))
	}
	b := seg[off : off+size]
	cellsEnd := sys.RoundUp(ctlSize+p.Depth*p.CellSize, sys.PageSize)
	return &channel{
		tail:     (*uint64)(unsafe.Pointer(&b[0])),
		fragTail: (*uint64)(unsafe.Pointer(&b[8])),
		awaited:  (*uint64)(unsafe.Pointer(&b[16])),
		cells:    b[ctlSize : ctlSize+p.Depth*p.CellSize],
		frags:    b[cellsEnd : cellsEnd+p.FragSlots*p.FragSize],
		depth:    uint64(p.Depth),
		cellSize: uint64(p.CellSize),
		fragSize: uint64(p.FragSize),
		wrap:     uint64(p.wrapBytes()),
		wrapFrom: uint64(min(p.FragSize, WrapFrom)),
	}, nil
}

// cellHeader opens every cell. seq is message number+1, stored last with
// release semantics; a consumer owns the cell once it loads the expected seq.
type cellHeader struct {
	seq    uint64
	length uint32
	kind   uint8
	_      [3]byte
}

// Cells are addressed by byte offset, advanced and wrapped as the ring turns:
// no division on the polling path.

func (c *channel) header(off uint64) *cellHeader {
	return (*cellHeader)(unsafe.Pointer(&c.cells[off]))
}

func (c *channel) payload(off uint64) []byte {
	return c.cells[off+headerSize : off+c.cellSize]
}

// The fragment ring is a ring of bytes. A fragment of n bytes takes n
// rounded up to a cache line, contiguously: one that would cross the end of
// the ring starts at offset 0 instead, and the bytes it skipped count as
// used until the consumer passes them. Small fragments pack densely (a
// 256 KiB ring holds 32 fragments of 8 KiB), and both sides compute every
// placement from the lengths alone, so nothing but the descriptor cell
// travels.

// fragPos is a position in the fragment ring: bytes passed (padding
// included) and the offset they lead to.
type fragPos struct {
	n   uint64
	off uint64
}

// place returns the offset of an n-byte fragment that goes from pos, and
// the position after it (the bytes skipped to the ring's start included).
//
// A large fragment (c.wrapFrom bytes or more: full-size, or a whole
// message of WrapFrom bytes or more) that would cross c.wrap starts at
// offset 0 too, the rest of the ring counting as skipped: a large message
// then streams through the first c.wrap bytes, which stay cached, instead
// of the whole ring, which the receiver would find evicted. Shorter
// fragments, of the small messages that fill a window, use the whole ring.
// Both sides place a fragment from its length alone.
func (c *channel) place(pos fragPos, n int) (off uint64, next fragPos) {
	size := uint64(len(c.frags))
	take := uint64(sys.RoundUp(n, cacheLine))
	limit := size
	if uint64(n) >= c.wrapFrom {
		limit = c.wrap
	}
	off = pos.off
	if off+take > limit {
		pos.n += size - off
		off = 0
	}
	next = fragPos{n: pos.n + take, off: off + take}
	if next.off == size {
		next.off = 0
	}
	return off, next
}

// ring is a position in a ring of fixed-size entries: a sequence count and
// the byte offset of the entry it designates.
type ring struct {
	n   uint64 // entries passed
	off uint64 // byte offset of entry n
}

func (r *ring) advance(entry, size uint64) {
	r.n++
	r.off += entry
	if r.off == size {
		r.off = 0
	}
}

// producer is the sending side's private view of a channel.
type producer struct {
	*channel
	head                   ring
	fragHead               fragPos
	tailSeen, fragTailSeen uint64
	pendNext               fragPos // after the fragment nextFrag handed out, for publishFrag
}

func (p *producer) cellFree() bool {
	if p.head.n-p.tailSeen < p.depth {
		return true
	}
	p.tailSeen = atomic.LoadUint64(p.tail)
	return p.head.n-p.tailSeen < p.depth
}

// fits reports whether the ring can hold everything up to next, given what
// the consumer has released as far as the producer knows. An empty ring
// takes any placement: the bytes skipped then were never written.
func (p *producer) fits(next fragPos) bool {
	return p.fragHead.n == p.fragTailSeen || next.n-p.fragTailSeen <= uint64(len(p.frags))
}

// cell is the payload area of the cell being filled.
func (p *producer) cell() []byte { return p.payload(p.head.off) }

// nextFrag returns the ring space for the next fragment of a message with
// rest bytes still to send (at most FragSize of them), or nil when the ring
// has no room for it yet. publishFrag hands it over.
func (p *producer) nextFrag(rest int) []byte {
	n := min(rest, int(p.fragSize))
	off, next := p.place(p.fragHead, n)
	if !p.fits(next) {
		p.fragTailSeen = atomic.LoadUint64(p.fragTail)
		if !p.fits(next) {
			return nil
		}
	}
	p.pendNext = next
	return p.frags[off : off+uint64(n)]
}

// putEager copies an eager payload into the current cell, the part past
// the cell's first cache line first: the header and the payload's first
// bytes, written last, then reach the consumer's polled line in one
// ownership transfer. Why: copying front to back wrote the first line,
// then the next, then the first again for the header, and the polling
// consumer took the first line back in between, a transfer more.
func (p *producer) putEager(buf []byte) {
	c := p.cell()
	if len(buf) > lineRoom {
		copy(c[lineRoom:], buf[lineRoom:])
		buf = buf[:lineRoom]
	}
	copy(c, buf)
}

// lineRoom is how many payload bytes share a cell's first cache line with
// its header.
const lineRoom = cacheLine - headerSize

// publish completes the current cell: fields first, then the sequence
// number, a release store (no fence: nothing the producer does next
// needs to wait for the consumer to see it).
func (p *producer) publish(kind uint8, length int) {
	h := p.header(p.head.off)
	h.length = uint32(length)
	h.kind = kind
	sys.StoreRelease64(&h.seq, p.head.n+1)
	p.head.advance(p.cellSize, uint64(len(p.cells)))
}

// publishFrag hands the fragment nextFrag returned over with its
// descriptor cell, whose words are the message size and the message's
// number on the channel (kindFrag), or the receive request it is for
// (kindFragTo, w1 unused). length must be the length of that fragment: the
// consumer places it from the length.
func (p *producer) publishFrag(kind uint8, length int, w0, w1 uint64) {
	body := p.cell()
	binary.LittleEndian.PutUint64(body, w0)
	binary.LittleEndian.PutUint64(body[8:], w1)
	p.fragHead = p.pendNext
	p.publish(kind, length)
}

// consumer is the receiving side's private view of a channel.
type consumer struct {
	*channel
	head     ring
	fragHead fragPos
	curNext  fragPos // after the fragment curFrag placed, for releaseFrag
}

// peek returns the next published cell, or nil.
func (c *consumer) peek() *cellHeader {
	h := c.header(c.head.off)
	if atomic.LoadUint64(&h.seq) != c.head.n+1 {
		return nil
	}
	return h
}

// body is the payload area of the current cell.
func (c *consumer) body() []byte { return c.payload(c.head.off) }

// curFrag is the oldest unconsumed fragment, n bytes long (the length in
// its descriptor cell).
func (c *consumer) curFrag(n int) []byte {
	off, next := c.place(c.fragHead, n)
	c.curNext = next
	return c.frags[off : off+uint64(n)]
}

// release hands the current cell back to the producer.
func (c *consumer) release() {
	c.head.advance(c.cellSize, uint64(len(c.cells)))
	sys.StoreRelease64(c.tail, c.head.n)
}

// releaseFrag hands the fragment curFrag returned back to the producer.
func (c *consumer) releaseFrag() {
	c.fragHead = c.curNext
	sys.StoreRelease64(c.fragTail, c.fragHead.n)
}
