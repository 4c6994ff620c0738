//go:build amd64 && !race

package sys

// StoreRelaxed stores v at *p with a plain MOV: ordered after the caller's
// earlier loads and stores (x86 is TSO) but, unlike atomic.StoreUint32
// (XCHG), without a full fence, so a later load may pass it. Pair it with
// ProcessBarrier on the reading side. It is plain Go so that it inlines:
// the assembly version cost a call through an ABI wrapper, about 5 ns on
// every use. The compiler keeps the store (p escapes, and calls and atomic
// operations around it order it). Under the race detector it is an atomic
// store, so the detector sees the hand-off.
func StoreRelaxed(p *uint32, v uint32) { *p = v }
