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
// Each single copy gets the copying rank's next sequence number, which it
// answers FIN with at once. Before the progress pass that started copies
// returns (sm.MarkFlusher), it queues on the copy stream one store of the
// last number into the flag of its table (shared memory registered with
// the driver, reached by the GPU through its device pointer). The store
// runs after the copies and behind a memory barrier
// (cuda.Stream.WriteValue32), so once the flag has reached a number the
// bytes of that copy and of every earlier one are in place: both sides
// poll it with a load from shared memory, where an event costs a driver
// call a poll, and a window of copies pays one store where events pay a
// record each. Numbers count up from 1, skip 0 when they wrap, and compare
// cyclically, so a number not yet stored reads as not reached.

// flagCompletions is a rank's sequence and every rank's flag.
type flagCompletions struct {
	tables []*table // by rank
	own    *uint32  // this rank's flag
	at     uintptr  // its device address
	seq    uint32   // the last number handed out
	stored uint32   // the last number queued for the flag
}

// newFlagCompletions finds the device address of rank self's flag, whose
// table the caller has registered with the driver, and has s store 0 there
// once: a driver without stream memory operations is refused here, not at
// the first copy.
func newFlagCompletions(self int, tables []*table, s *cuda.Stream) (*flagCompletions, error) {
	own := tables[self].flag
	at, err := cuda.HostDevicePointer(uintptr(unsafe.Pointer(own)))
	if err != nil {
		return nil, fmt.Errorf("cudaipc: the completion flag's device address: %w", err)
	}
	if err := s.WriteValue32(at, 0); err != nil {
		return nil, fmt.Errorf("cudaipc: completion=flag stores the flag from the copy stream: %w", err)
	}
	if err := s.Synchronize(); err != nil {
		return nil, fmt.Errorf("cudaipc: completion=flag: first store of the flag: %w", err)
	}
	return &flagCompletions{tables: tables, own: own, at: at}, nil
}

// mark hands out the next number as the token of the work queued so far;
// flush stores it.
func (k *flagCompletions) mark(*cuda.Stream) (uint64, error) {
	if k.seq++; k.seq == 0 {
		k.seq = 1
	}
	return uint64(k.seq), nil
}

// flush queues the store of the last number handed out on s, after the
// work queued on it so far, unless it is queued already. If the store
// cannot be queued it waits for the stream and stores the number from the
// host: the peers hold FINs naming it. An error means neither worked.
func (k *flagCompletions) flush(s *cuda.Stream) error {
	if k.stored == k.seq {
		return nil
	}
	if err := s.WriteValue32(k.at, k.seq); err != nil {
		if serr := s.Synchronize(); serr != nil {
			return fmt.Errorf("cudaipc: queue completion flag %d: %w; wait for its copies: %w", k.seq, err, serr)
		}
		atomic.StoreUint32(k.own, k.seq)
	}
	k.stored = k.seq
	return nil
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
