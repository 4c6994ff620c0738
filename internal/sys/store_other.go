//go:build !amd64 || race

package sys

import "sync/atomic"

// StoreRelaxed is an atomic store where no plain-store version exists (and
// under the race detector, which must see it).
func StoreRelaxed(p *uint32, v uint32) { atomic.StoreUint32(p, v) }

// StoreRelease64 is an atomic store (sequentially consistent, so at least
// release) where no plain-store version exists, and under the race
// detector.
func StoreRelease64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }

// StoreRelease32 is StoreRelease64 for a 32-bit word.
func StoreRelease32(p *uint32, v uint32) { atomic.StoreUint32(p, v) }
