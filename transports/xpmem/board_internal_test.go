package xpmem

import (
	"os"
	"testing"
)

// A reader gets every notice posted since its last read, and when the
// poster has lapped it, an order to drop everything of that peer instead.
func TestBoardNoticesAndOverrun(t *testing.T) {
	dev := newFake()
	b, err := newBoard()
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	seg, _ := dev.Make()
	apid, _ := dev.Get(seg)
	pb := peerBoard{remote: b.addr}
	if pb.local, err = dev.Attach(apid, b.addr, boardBytes); err != nil {
		t.Fatal(err)
	}
	pid := os.Getpid()
	for _, c := range []struct {
		posts     int
		wantSpans int
		wantAll   bool
	}{{0, 0, false}, {3, 3, false}, {boardSlots - 1, boardSlots - 1, false}, {boardSlots, 0, true}, {boardSlots + 7, 0, true}, {1, 1, false}} {
		for i := range c.posts {
			b.post(uintptr(0x10000*(i+1)), 4096)
		}
		spans, all, err := pb.read(dev, pid)
		if err != nil {
			t.Fatal(err)
		}
		if len(spans) != c.wantSpans || all != c.wantAll {
			t.Errorf("%d posts: %d spans, all=%v; want %d, %v", c.posts, len(spans), all, c.wantSpans, c.wantAll)
		}
		for i, s := range spans {
			if want := uintptr(0x10000 * (i + 1)); s.Start != want || s.End != want+4096 {
				t.Errorf("%d posts: notice %d is %#x-%#x, want %#x-%#x", c.posts, i, s.Start, s.End, want, want+4096)
			}
		}
	}
	if err := dev.Detach(pb.local); err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
}
