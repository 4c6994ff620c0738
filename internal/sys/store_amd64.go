//go:build amd64 && !race

package sys

// StoreRelaxed stores v at *p with a plain MOV: ordered after the caller's
// earlier loads and stores (x86 is TSO) but, unlike atomic.StoreUint32
// (XCHG), without a full fence, so a later load may pass it. Pair it with
// ProcessBarrier on the reading side. The compiler keeps the store (p
// escapes, and calls and atomic operations around it order it). Under the
// race detector it is an atomic store, so the detector sees the hand-off.
// It is plain Go so that it inlines. Why: an assembly version costs a call
// through an ABI wrapper each time, and sm's progress-thread hand-off
// stores on every engine call.
func StoreRelaxed(p *uint32, v uint32) { *p = v }

// StoreRelease64 publishes v at *p with a plain MOV, which x86 (TSO) makes
// a release store: every load and store the caller made before it is
// visible to a reader that sees v. Unlike atomic.StoreUint64 (XCHG) it
// does not wait for the store buffer to drain. Readers load *p atomically.
// Why: sm's cell sequence words and consumer counters are published once
// per message, and the fence costs more than moving the cache line.
func StoreRelease64(p *uint64, v uint64) { *p = v }

// StoreRelease32 is StoreRelease64 for a 32-bit word.
func StoreRelease32(p *uint32, v uint32) { *p = v }
