//go:build amd64 && !race

package sys

// StoreRelaxed stores v at *p with a plain MOV: ordered after the caller's
// earlier loads and stores (x86 is TSO) but, unlike atomic.StoreUint32
// (XCHG), without a full fence, so a later load may pass it. Pair it with
// ProcessBarrier on the reading side. Under the race detector it is an
// atomic store, so the detector sees the hand-off.
func StoreRelaxed(p *uint32, v uint32)
