package sm

import (
	"math"

	"github.com/gotune/gotune/internal/sys"
)

// Fragment copies (sm.copy). A pipelined message is copied twice: into the
// fragment ring by the sender, out of it by the receiver. Two routines
// compete: Go's copy (a vector loop, AVX here) and REP MOVSB. Eager
// messages (cells) always use Go's copy: movsb's start-up cost shows in
// latency (below).

// MoveStringMin is where auto copies with REP MOVSB in both directions.
// Measured here (Zen 5 VM, pinned ranks, bw interleaved with Open MPI
// vader, 10 rounds): with a 4 MiB fragment ring, 32 KiB messages moved at
// 54 GB/s with Go's copy and 40-43 with movsb (vader: 51-54), while from
// 64 KiB up movsb led by 10-20% (62-66 against 52-54). In a 1 MiB ring
// movsb had been the better of two poor choices at 8-32 KiB.
const MoveStringMin = 64 << 10

// MoveStringInFrom and MoveStringInMax bound the fragments that auto also
// copies into the ring with REP MOVSB; the receiver copies them out with
// Go's copy.
//
// This VM has spells (seconds to minutes, several an hour) in which Go's
// vector copy runs at a fifth of its usual speed and movsb slows far less.
// bw, interleaved rounds, per-round ratios (A/B driver, results/vm/copy):
//   - sm.copy=movsb against the previous built-in (Go's copy below 64 KiB),
//     150 rounds: in the 27 slow ones, where the built-in moved 6-8 GB/s
//     at 8-32 KiB against 34-36 from 64 KiB up, 3.7-4.1x at 8-32 KiB; in
//     the 123 fast ones 1.01, 0.97 and 0.81x at 8, 16 and 32 KiB.
//   - By direction, fast rounds of 100: movsb on the way out 0.67, 0.75
//     and 0.60x at 8, 16 and 32 KiB; on the way in 1.03, 1.01 and 0.78x.
//   - Movsb on the way in from 8 KiB to below 32 KiB, 100 rounds (51 slow):
//     2.99, 3.08 and 3.41x at 8, 16 and 24 KiB in the slow ones; 1.03,
//     1.02 and 0.84x in the fast ones; 16 KiB one-way latency 0.81x.
//
// Prefetching does not rescue the vector copy in a slow spell: a 32-byte
// loop asking for source lines (PREFETCHT0) and destination ownership
// (PREFETCHW) 1 KiB ahead moved 0.99-1.03x Go's copy at 8-48 KiB in the
// slow rounds (15 of 100), 0.96-1.02x in the fast ones, where movsb made
// 2.6-2.8x at 24-48 KiB (results/vm/copy, pf1).
//
// Nor do whole-line stores: a 64-byte AVX-512 loop into the ring moved
// 0.94-1.06x in the slow rounds. Non-temporal stores did rescue it
// (2.8-3.2x) but cost 0.41-0.45x in the fast rounds (results/vm/copy, z1): what
// a slow spell makes dear is taking ownership of lines the other core
// holds, which movsb and streaming stores avoid and a vector store cannot.
//
// So auto uses movsb on the way in only where that costs nothing in the
// fast phase, 8-16 KiB; from 20 KiB to 64 KiB both ways use Go's copy,
// except that the sender watches its own copies into the ring and turns to
// movsb while a deep spell lasts (spell.go). Eager messages (cells) stay with Go's
// copy too: movsb into the cell raised bw at 1-4 KiB by 1.06-1.32x but
// also 512 B-4 KiB one-way latency by 1.06-1.25x (60 and 40 rounds), and
// cost bw below 768 B.
const (
	MoveStringInFrom = 8 << 10
	MoveStringInMax  = 16 << 10
)

// copier is one direction's choice of routine, fixed when the endpoint is
// made so that a fragment's copy tests two bounds and no option: REP MOVSB
// for n >= from and for lo <= n <= hi, Go's copy otherwise. guard says
// that Go's copies go through the channel's spellGuard (spell.go).
type copier struct {
	from, lo, hi int
	guard        bool
}

func knownCopyMode(s string) bool { return s == "auto" || s == "go" || s == "movsb" }

// newCopier is mode's (Params.Copy) choice on the way into the ring (in)
// or out of it.
func newCopier(mode string, in bool) copier {
	switch {
	case mode == "movsb":
		return copier{from: 0}
	case mode == "go":
		return copier{from: math.MaxInt, lo: 1} // lo > hi: no band
	case in:
		return copier{from: MoveStringMin, lo: MoveStringInFrom, hi: MoveStringInMax, guard: true}
	}
	return copier{from: MoveStringMin, lo: 1}
}

// copy copies min(len(dst), len(src)) bytes and returns that count.
func (c copier) copy(dst, src []byte) int {
	if c.movsb(min(len(dst), len(src))) {
		return sys.CopyMovsb(dst, src)
	}
	return copy(dst, src)
}

// movsb says whether an n-byte copy uses REP MOVSB.
func (c copier) movsb(n int) bool { return n >= c.from || n >= c.lo && n <= c.hi }
