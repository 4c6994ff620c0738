package verbs

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
)

// openDevice opens the device GOTUNE_IB_DEV names (default: the first),
// skipping when there is none (GOTUNE_REQUIRE=rdma makes that a failure).
func openDevice(t *testing.T) (*Context, Port) {
	t.Helper()
	c, err := Open(os.Getenv("GOTUNE_IB_DEV"))
	if errors.Is(err, sys.ErrNotSupported) {
		testutil.SkipUnless(t, "rdma", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	devs, err := Discover(os.DirFS(SysfsRoot))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Name == c.Name {
			for _, p := range d.Ports {
				if p.State == "ACTIVE" && p.Chosen >= 0 {
					return c, p
				}
			}
		}
	}
	t.Fatalf("%s has no active port with a usable GID: %+v", c.Name, devs)
	return nil, Port{}
}

// A loopback pair of RC queue pairs on one device: send/receive, RDMA
// write and RDMA read move validated bytes, and a completion raises an
// event on the channel.
func TestLoopbackRC(t *testing.T) {
	c, port := openDevice(t)
	attr, err := c.Query()
	if err != nil {
		t.Fatal(err)
	}
	pa, err := c.QueryPort(port.Num)
	if err != nil {
		t.Fatal(err)
	}
	gid, err := c.QueryGID(port.Num, port.Chosen)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: fw %s, max_qp_wr %d, rd_atom %d; port %d %s MTU %d, GID[%d] %s", c.Name, attr.FW, attr.MaxQPWR, attr.MaxQPRdAtom, port.Num, pa.State, pa.ActiveMTU.Bytes(), port.Chosen, gid)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	const n = 256 << 10
	mem, err := sys.MapAnon(4*n, true)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Unmap(mem)
	mr, err := pd.Register(sys.AddressOf(mem), len(mem), LocalWrite|RemoteRead|RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	ch, err := c.NewChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	cq, err := c.NewCQ(64, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	caps := QPCaps{SendWR: 16, RecvWR: 16, MaxInline: 64}
	a, err := pd.NewRCQP(cq, cq, caps)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := pd.NewRCQP(cq, cq, caps)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rd := min(attr.MaxQPRdAtom, 4)
	for _, x := range []struct {
		q    *QP
		peer *QP
	}{{a, b}, {b, a}} {
		if err := x.q.Init(port.Num, LocalWrite|RemoteRead|RemoteWrite); err != nil {
			t.Fatal(err)
		}
		r := Remote{QPN: x.peer.Num, PSN: 7, LID: pa.LID, GID: gid, Global: pa.LinkLayer != "InfiniBand", SGID: port.Chosen, MTU: pa.ActiveMTU, RdAtomic: rd}
		if err := x.q.ReadyToReceive(r); err != nil {
			t.Fatal(err)
		}
		if err := x.q.ReadyToSend(7, rd); err != nil {
			t.Fatal(err)
		}
	}
	src, dst, rsrc, rdst := mem[:n], mem[n:2*n], mem[2*n:3*n], mem[3*n:]
	for i := range src {
		src[i] = byte(i*7 + i>>11)
		rsrc[i] = byte(i*13 + 5)
	}
	addr := func(b []byte) uintptr { return sys.AddressOf(b) }
	wait := func(want WCOpcode, id uint64) WC {
		t.Helper()
		var wcs [4]WC
		for {
			k, err := cq.Poll(wcs[:])
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				continue
			}
			w := wcs[0]
			if k > 1 {
				t.Fatalf("%d completions at once, want 1", k)
			}
			if w.Status != 0 {
				t.Fatalf("completion %d: %s", w.ID, StatusString(w.Status))
			}
			if w.Opcode != want || w.ID != id {
				t.Fatalf("completion %+v, want opcode %d id %d", w, want, id)
			}
			return w
		}
	}
	// send/receive
	if err := b.PostRecv(1, addr(dst), n, mr.LKey); err != nil {
		t.Fatal(err)
	}
	if err := a.PostSend(SendWR{ID: 2, Op: OpSend, Addr: addr(src), Len: n, LKey: mr.LKey, Signaled: true}); err != nil {
		t.Fatal(err)
	}
	got := []WC{}
	got = append(got, wait2(t, cq)...)
	if len(got) != 2 || !bytes.Equal(src, dst) {
		t.Fatalf("send/receive: completions %+v, payload equal %v", got, bytes.Equal(src, dst))
	}
	// RDMA write from a into rdst
	if err := a.PostSend(SendWR{ID: 3, Op: OpRDMAWrite, Addr: addr(rsrc), Len: n, LKey: mr.LKey, RemoteAddr: uint64(addr(rdst)), RKey: mr.RKey, Signaled: true}); err != nil {
		t.Fatal(err)
	}
	wait(WCRDMAWrite, 3)
	if !bytes.Equal(rsrc, rdst) {
		t.Fatal("RDMA write: payload differs")
	}
	// RDMA read from src into dst, after changing src; then an event.
	for i := range src {
		src[i] ^= 0x5a
	}
	if err := cq.RequestNotify(); err != nil {
		t.Fatal(err)
	}
	if err := b.PostSend(SendWR{ID: 4, Op: OpRDMARead, Addr: addr(dst), Len: n, LKey: mr.LKey, RemoteAddr: uint64(addr(src)), RKey: mr.RKey, Signaled: true}); err != nil {
		t.Fatal(err)
	}
	fds := []sys.PollFD{{Fd: int32(ch.FD()), Events: sys.PollIn}}
	if k, err := sys.Poll(fds, 60_000); err != nil || k != 1 {
		t.Fatalf("no completion event within a minute: %d %v", k, err)
	}
	if err := ch.GetEvent(); err != nil {
		t.Fatal(err)
	}
	wait(WCRDMARead, 4)
	if !bytes.Equal(src, dst) {
		t.Fatal("RDMA read: payload differs")
	}
	// inline send of a small payload
	if err := b.PostRecv(5, addr(dst), 64, mr.LKey); err != nil {
		t.Fatal(err)
	}
	copy(src, "inline payload")
	if err := a.PostSend(SendWR{ID: 6, Op: OpSend, Addr: addr(src), Len: 14, LKey: mr.LKey, Signaled: true, Inline: true}); err != nil {
		t.Fatal(err)
	}
	got = wait2(t, cq)
	if string(dst[:14]) != "inline payload" {
		t.Fatalf("inline send: got %q (%+v)", dst[:14], got)
	}
	st, err := Fork()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fork protection: %s", st)
}

// wait2 polls until two completions (a send's and its receive's) are in.
func wait2(t *testing.T, cq *CQ) []WC {
	t.Helper()
	var out []WC
	var wcs [4]WC
	for len(out) < 2 {
		k, err := cq.Poll(wcs[:])
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wcs[:k] {
			if w.Status != 0 {
				t.Fatalf("completion %d: %s", w.ID, StatusString(w.Status))
			}
			out = append(out, w)
		}
	}
	return out
}
