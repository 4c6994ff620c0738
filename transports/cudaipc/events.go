package cudaipc

import (
	"errors"
	"fmt"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/transports/sm"
)

// Completion through IPC events (cudaipc.completion=event, the default).
//
// Each rank creates eventSlots interprocess events when it starts and
// publishes their handles in its table. After queueing a single copy it
// records the next event in turn on its copy stream and answers FIN at
// once, naming the event; both sides then poll it with cuEventQuery: the
// copying rank its own event, the peer the same event opened through its
// handle. So several copies are in flight at once, nobody blocks in
// cuStreamSynchronize, and the peer completes as soon as the GPU has
// finished, whether or not the copying rank calls in again.
//
// An event is recorded again eventSlots copies later, maybe before a peer
// has seen its earlier record finish. That is safe: the copies are ordered
// on one stream, so the later record finishes after the earlier one; the
// peer only learns of its copy later.

// completions are a rank's completion events and the peers' events it has
// opened.
type completions struct {
	self   int
	tables []*table // by rank
	own    [eventSlots]*cuda.Event
	next   int
	peers  [][eventSlots]*cuda.Event // by rank, each opened on first query
}

// newCompletions creates rank self's events and publishes their handles in
// its table, in the bound context.
func newCompletions(self int, tables []*table) (*completions, error) {
	k := &completions{self: self, tables: tables, peers: make([][eventSlots]*cuda.Event, len(tables))}
	for i := range k.own {
		ev, err := cuda.NewEvent(cuda.EventInterprocess | cuda.EventDisableTiming)
		if err != nil {
			return k, fmt.Errorf("cudaipc: create completion event %d: %w", i, err)
		}
		k.own[i] = ev
		h, err := ev.IPCHandle()
		if err != nil {
			return k, fmt.Errorf("cudaipc: export completion event %d: %w", i, err)
		}
		tables[self].events[i] = h
	}
	return k, nil
}

// mark records the next event after the work queued on s so far and
// returns its token (slot+1).
func (k *completions) mark(s *cuda.Stream) (uint64, error) {
	slot := k.next
	k.next = (slot + 1) % eventSlots
	if err := k.own[slot].Record(s); err != nil {
		return 0, fmt.Errorf("cudaipc: record completion event %d: %w", slot, err)
	}
	return uint64(slot) + 1, nil
}

// done reports whether the copy behind token, which rank recorded, has
// finished.
func (k *completions) done(rank int, token uint64) (bool, error) {
	if token == 0 || token > eventSlots || rank < 0 || rank >= len(k.tables) {
		return false, fmt.Errorf("cudaipc: rank %d named completion event %d of %d", rank, token, eventSlots)
	}
	slot := int(token - 1)
	if rank == k.self {
		return k.own[slot].Query()
	}
	ev := k.peers[rank][slot]
	if ev == nil {
		var err error
		if ev, err = cuda.OpenIPCEvent(k.tables[rank].events[slot]); err != nil {
			return false, fmt.Errorf("cudaipc: open rank %d's completion event %d: %w", rank, slot, err)
		}
		k.peers[rank][slot] = ev
	}
	return ev.Query()
}

// flush: an event is recorded by mark itself, before its token is sent.
func (k *completions) flush(*cuda.Stream) error { return nil }

// close destroys the events, own and opened.
func (k *completions) close() error {
	var errs []error
	for i := range k.own {
		errs = append(errs, k.own[i].Destroy())
	}
	for r := range k.peers {
		for i := range k.peers[r] {
			errs = append(errs, k.peers[r][i].Destroy())
		}
	}
	return errors.Join(errs...)
}

// completer marks the copies queued on a stream so far and says whether
// a rank's mark has been reached: IPC events (completions) or a flag in
// shared memory (flagCompletions).
type completer interface {
	mark(s *cuda.Stream) (token uint64, err error)
	done(rank int, token uint64) (bool, error)
	// flush queues on s the marks that mark left pending (the flag's).
	flush(s *cuda.Stream) error
}

// markingCopier is the copier completing by its completer's marks
// (sm.EventCopy), or by its relay's done word for the device-to-device
// copies of up to relayMax bytes it hands the copier's relay.
type markingCopier struct {
	*copier
	marks    completer
	relayMax int
}

// relayToken marks a token naming a relay message's number: the relay's
// numbers count from 1 in 48 bits, the completers' tokens stay below 2^32.
const relayToken = 1 << 63

var (
	_ sm.EventCopy   = markingCopier{}
	_ sm.MarkFlusher = markingCopier{}
)

// Start rings the relay for a small device-to-device copy while its block
// runs and has a free slot; otherwise it queues the copy on the stream and
// marks it, launching the block for the copies after it. The ends are
// found first: opening a peer's allocation can outlast the block's idle
// life, and a message rung to a block that ended meanwhile waits for this
// rank to call in again (relay.revive).
func (c markingCopier) Start(pid int, local []byte, at sm.Place, remote uintptr, pull bool) (uint64, error) {
	dst, src, err := c.ends(pid, local, remote, pull)
	if err != nil {
		return 0, err
	}
	if c.relay != nil && at == sm.PlaceDevice && len(local) <= c.relayMax {
		if c.relay.running() && c.relay.free() {
			number, err := c.relay.ring(dst, src, len(local))
			if err != nil {
				return 0, err
			}
			return relayToken | number, nil
		}
		if err := c.relay.warm(); err != nil {
			return 0, err
		}
	}
	if err := c.queue(dst, src, len(local), at); err != nil {
		return 0, err
	}
	return c.marks.mark(c.stream)
}

// Done says whether the mark or relay message behind token, which rank
// made, is reached.
func (c markingCopier) Done(rank int, token uint64) (bool, error) {
	if token&relayToken == 0 {
		return c.marks.done(rank, token)
	}
	number := token &^ relayToken
	if rank < 0 || rank >= len(c.tables) || number == 0 || number >= relayStop {
		return false, fmt.Errorf("cudaipc: rank %d named relay message %d", rank, number)
	}
	if rank == c.self && c.relay != nil {
		return c.relay.landed(number) // copying what an ended block left
	}
	return relayReached(c.tables[rank].relay, number), nil
}

// FlushMarks queues the marks Start left pending.
func (c markingCopier) FlushMarks() error { return c.marks.flush(c.stream) }
