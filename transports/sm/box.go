package sm

// The fast box: one cache line per pair of ranks that carries the
// smallest messages both ways, so that a ping-pong moves one line per
// message where the two one-way rings move two.

import (
	"sync/atomic"
	"unsafe"

	"github.com/gotune/gotune/internal/sys"
)

// A pair's box is one cache line; the lower rank writes its first half,
// the higher rank its second. A half is a header word and BoxPayload
// bytes. The header holds, low bits first: the half's message count (16
// bits), how many of the peer's box messages its writer had taken when it
// wrote (its acknowledgement, 16 bits), the payload's length (8 bits), and
// the writer's count of cells published on its ring to the peer (low 24
// bits): the box message goes after those cells and before the next one.
//
// A sender uses its half only when the peer has acknowledged its last box
// message, which the peer does only when it writes its own half: a reply.
// So the box carries the messages of a ping-pong, each moving the line
// once, and the ring everything else. Why: a ring per direction makes a
// ping-pong move two lines a way, 2.2–2.6× one line's transfer on the
// hosts measured, while a line written by both sides moves once
// (docs/performance.md, Shared memory); streamed through a box, each
// message would wait for the previous one's acknowledgement (2.2× a
// ring's rate there).
//
// The receiver takes the box message when its count of cells taken from
// the ring equals the position the header names. It checks the box after
// loading each cell's sequence word: the sender wrote the box before any
// cell that follows it, so a cell seen means the box before it is seen.

// BoxPayload is the largest message the fast box carries.
const BoxPayload = 24

const (
	boxHalf     = cacheLine / 2
	boxAtBits   = 24
	boxAtMask   = 1<<boxAtBits - 1
	boxRegion   = 2 * cacheLine // the box line and the line beside it, against prefetch sharing
	boxInPairAt = ctlSize - boxRegion
)

// box is one rank's view of a pair's fast box.
type box struct {
	out  *[4]uint64 // this rank's half
	in   *[4]uint64 // the peer's half
	sent uint16     // box messages written
	got  uint16     // the peer's box messages taken
}

// openBox maps the box of ranks a and b: it lies in the control area of
// the channel from the lower rank to the higher.
func openBox(seg []byte, rank, peer, n int, p Params) box {
	lo, hi := min(rank, peer), max(rank, peer)
	off := n*p.RingBytes() + pairIndex(lo, hi, n)*p.PairBytes() + boxInPairAt
	line := (*[8]uint64)(unsafe.Pointer(&seg[off]))
	low, high := (*[4]uint64)(line[0:4]), (*[4]uint64)(line[4:8])
	if rank == lo {
		return box{out: low, in: high}
	}
	return box{out: high, in: low}
}

// free reports whether the peer has taken this side's last box message.
func (b *box) free() bool {
	return uint16(atomic.LoadUint64(&b.in[0])>>16) == b.sent
}

// put writes buf (at most BoxPayload bytes) as the next box message,
// after the cells tx has published: payload first, then the header, a
// release store.
func (b *box) put(buf []byte, cells uint64) {
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&b.out[1])), BoxPayload), buf)
	b.sent++
	sys.StoreRelease64(&b.out[0], uint64(b.sent)|uint64(b.got)<<16|uint64(len(buf))<<32|(cells&boxAtMask)<<40)
}

// due returns the length of the peer's next box message when it is there
// and comes before the ring's cell number head (the next to be taken).
func (b *box) due(head uint64) (int, bool) {
	h := atomic.LoadUint64(&b.in[0])
	if uint16(h) != b.got+1 || h>>40 != head&boxAtMask {
		return 0, false
	}
	return int(h >> 32 & 0xff), true
}

// payload is the due message of n bytes, in place until taken.
func (b *box) payload(n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&b.in[1])), n)
}

// taken marks the due message taken; the peer learns it from this side's
// next box message.
func (b *box) taken() { b.got++ }
