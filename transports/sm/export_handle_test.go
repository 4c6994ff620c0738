package sm_test

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// handleCopy is an in-process Exporter: Export records the buffer under a
// fresh handle, CopyHandle copies through the record alone (never the
// address it is given, which it checks), Release forgets it. It counts
// what happened so that tests can see every handle released once.
type handleCopy struct {
	pull       bool
	refuse     error // Export fails with this, when set
	mu         sync.Mutex
	next       uint64
	live       map[uint64]exported
	exported   int
	copied     int
	used, idle int // releases after a copy, and without one
}

type exported struct {
	buf      []byte
	writable bool
}

func newHandleCopy(pull bool) *handleCopy {
	return &handleCopy{pull: pull, live: map[uint64]exported{}}
}

func (h *handleCopy) Name() string          { return "handles" }
func (h *handleCopy) Pull() bool            { return h.pull }
func (h *handleCopy) Rendezvous(n int) bool { return n >= 65 }
func (h *handleCopy) Copy(int, []byte, sm.Place, uintptr, bool) error {
	return errors.New("Copy without a handle")
}

func (h *handleCopy) Export(buf []byte, _ sm.Place, writable bool) (uint64, error) {
	if h.refuse != nil {
		return 0, h.refuse
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	h.live[h.next<<8|0x5a] = exported{buf, writable}
	h.exported++
	return h.next<<8 | 0x5a, nil
}

func (h *handleCopy) CopyHandle(_ int, local []byte, _ sm.Place, handle uint64, remote uintptr, pull bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	x, ok := h.live[handle]
	switch {
	case !ok:
		return fmt.Errorf("handle %#x: %w", handle, syscall.EINVAL)
	case len(x.buf) > 0 && sys.AddressOf(x.buf) != remote:
		return fmt.Errorf("handle %#x is for %#x, the control message says %#x", handle, sys.AddressOf(x.buf), remote)
	case !pull && !x.writable:
		return fmt.Errorf("handle %#x: write into a read-only export: %w", handle, syscall.EACCES)
	}
	h.copied++
	if pull {
		copy(local, x.buf)
	} else {
		copy(x.buf, local)
	}
	return nil
}

func (h *handleCopy) Release(handle uint64, used bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.live[handle]; !ok {
		panic(fmt.Sprintf("release of handle %#x, not live", handle))
	}
	delete(h.live, handle)
	if used {
		h.used++
	} else {
		h.idle++
	}
}

// The handle a side exports travels in its control message (the sender's
// request-to-send when pulling, the receiver's clear-to-send when
// pushing), the copy goes through it, and each one is released once after
// the peer's copy; across eager, pipelined and rendezvous sizes, in both
// directions, with receives posted late (an unexpected request-to-send
// keeps its handle) and with a truncating receive.
func TestExportedHandles(t *testing.T) {
	for _, pull := range []bool{true, false} {
		t.Run(fmt.Sprintf("pull=%v", pull), func(t *testing.T) {
			mech := newHandleCopy(pull)
			a, b := pair(t, small(2, 2), mech)
			sizes := []int{100, 1000, 8, 65, 2000, 64}
			rendezvous := 0
			for _, n := range sizes {
				if n >= 65 {
					rendezvous++
				}
			}
			for round := range 3 {
				if s, r := window(t, a, b, 0, 1, sizes, 2000, round); s != nil || r != nil {
					t.Fatalf("round %d, 0->1: send %v, receive %v", round, s, r)
				}
				if s, r := window(t, b, a, 1, 0, sizes, 2000, round+100); s != nil || r != nil {
					t.Fatalf("round %d, 1->0: send %v, receive %v", round, s, r)
				}
			}
			// Truncation: 500 bytes into 300, through a handle.
			if s, r := window(t, a, b, 0, 1, []int{500}, 300, 7); s != nil || !errors.Is(r, transports.ErrTruncated) {
				t.Errorf("truncating receive: send %v, receive %v (want ErrTruncated)", s, r)
			}
			want := 6*rendezvous + 1
			if mech.exported != want || mech.copied != want || mech.used != want || mech.idle != 0 || len(mech.live) != 0 {
				t.Errorf("exported %d, copied %d, released %d after a copy and %d without, %d live; want %d, %d, %d, 0, 0",
					mech.exported, mech.copied, mech.used, mech.idle, len(mech.live), want, want, want)
			}
			closeAll(t, a, b)
		})
	}
}

// An export the mechanism refuses (ErrNotSupported) is a refused single
// copy: the message goes through the fragments intact and single copy
// stops with that peer; nothing is left exported.
func TestRefusedExportFallsBack(t *testing.T) {
	for _, pull := range []bool{true, false} {
		t.Run(fmt.Sprintf("pull=%v", pull), func(t *testing.T) {
			mech := newHandleCopy(pull)
			mech.refuse = sys.NotSupported("create region", "planted refusal", syscall.EACCES)
			a, b := pair(t, small(2, 2), mech)
			for round := range 2 {
				if s, r := window(t, a, b, 0, 1, []int{1000, 65, 8}, 2000, round); s != nil || r != nil {
					t.Fatalf("round %d: send %v, receive %v", round, s, r)
				}
			}
			if mech.copied != 0 || len(mech.live) != 0 {
				t.Errorf("%d copies, %d handles live after refused exports", mech.copied, len(mech.live))
			}
			side := 0 // the sender exports to pull, the receiver to push
			if !pull {
				side = 1
			}
			if why := []*sm.Endpoint{a, b}[side].Fallbacks()[1-side]; why == nil || !errors.Is(why, syscall.EACCES) {
				t.Errorf("rank %d's fallback reason %v does not carry the refusal", side, why)
			}
			closeAll(t, a, b)
		})
	}
}
