package cudaipc

import (
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/gotune/gotune/internal/cuda"
)

// Completion through a flag word (cudaipc.completion=flag).
//
// After queueing a single copy the copying rank queues, on the same
// stream, a store of its next sequence number into the flag of its table
// (shared memory registered with the driver, reached by the GPU through
// its device pointer) and answers FIN at once, naming the number. The
// store runs after the copy and behind a memory barrier
// (cuda.Stream.WriteValue32), so once the flag has reached the number the
// copy's bytes are in place: both sides poll it with a load from shared
// memory, where an event costs a driver call a poll. Numbers count up
// from 1, skip 0 when they wrap, and compare cyclically.

// flagCompletions is a rank's sequence and every rank's flag.
type flagCompletions struct {
	tables []*table // by rank
	at     uintptr  // the device address of this rank's flag
	seq    uint32   // the last number queued
}

// newFlagCompletions finds the device address of rank self's flag, whose
// table the caller has registered with the driver.
func newFlagCompletions(self int, tables []*table) (*flagCompletions, error) {
	at, err := cuda.HostDevicePointer(uintptr(unsafe.Pointer(tables[self].flag)))
	if err != nil {
		return nil, fmt.Errorf("cudaipc: the completion flag's device address: %w", err)
	}
	return &flagCompletions{tables: tables, at: at}, nil
}

// mark queues the store of the next number on s, after the work queued on
// it so far, and returns the number as the copy's token.
func (k *flagCompletions) mark(s *cuda.Stream) (uint64, error) {
	if k.seq++; k.seq == 0 {
		k.seq = 1
	}
	if err := s.WriteValue32(k.at, k.seq); err != nil {
		return 0, fmt.Errorf("cudaipc: queue completion flag %d: %w", k.seq, err)
	}
	return uint64(k.seq), nil
}

// done reports whether rank's flag has reached token.
func (k *flagCompletions) done(rank int, token uint64) (bool, error) {
	if token == 0 || token > math.MaxUint32 || rank < 0 || rank >= len(k.tables) {
		return false, fmt.Errorf("cudaipc: rank %d named completion flag value %d", rank, token)
	}
	return reached(atomic.LoadUint32(k.tables[rank].flag), uint32(token)), nil
}

// reached compares flag values cyclically: v has reached token when it is
// token or up to 2^31-1 numbers past it.
func reached(v, token uint32) bool { return int32(v-token) >= 0 }
