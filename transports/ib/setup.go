package ib

// Setup: picking and opening the device, the slots every peer shares,
// the connection blob and connecting the queue pairs.

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/verbs"
)

// open picks and opens the device, port and GID and creates the
// resources every peer shares.
func (t *Transport) open() error {
	p := t.params
	devs, err := verbs.Discover(os.DirFS(verbs.SysfsRoot))
	if err != nil {
		return fmt.Errorf("ib: %w", err)
	}
	var view verbs.NetView
	if p.Dev == "" {
		view, _ = verbs.LocalNetView() // no view: the first active device, as without namespaces
	}
	dev, port, have := pickPort(devs, p, view)
	if port == nil {
		what := "no device with an active port"
		if p.Dev != "" || p.Port != 0 {
			what = fmt.Sprintf("no device ib.dev=%q with port ib.port=%d", p.Dev, p.Port)
		}
		return sys.NotSupported("ib", fmt.Sprintf("%s (have %v)", what, have), nil)
	}
	t.dev = dev
	if port.State != "ACTIVE" {
		return sys.NotSupported("ib", fmt.Sprintf("%s port %d is %s", t.dev, port.Num, port.State), nil)
	}
	t.port, t.gidIndex = port.Num, p.GID
	if t.gidIndex < 0 {
		if port.Chosen < 0 {
			return sys.NotSupported("ib", fmt.Sprintf("%s port %d: %s", t.dev, port.Num, port.Why), nil)
		}
		t.gidIndex = port.Chosen
	}
	if t.ctx, err = verbs.Open(t.dev); err != nil {
		return fmt.Errorf("ib: %w", err)
	}
	pa, err := t.ctx.QueryPort(t.port)
	if err != nil {
		return fmt.Errorf("ib: %w", err)
	}
	t.mtu = pa.ActiveMTU
	if p.MTU != 0 {
		m, _ := verbs.MTUOf(p.MTU)
		if m > pa.ActiveMTU {
			return fmt.Errorf("ib: ib.mtu=%d is above %s port %d's active MTU %d", p.MTU, t.dev, t.port, pa.ActiveMTU.Bytes())
		}
		t.mtu = m
	}
	t.maxMsg = min(int(pa.MaxMsg), 1<<30)
	if t.maxMsg <= 0 {
		t.maxMsg = 1 << 30
	}
	if t.pd, err = t.ctx.AllocPD(); err != nil {
		return fmt.Errorf("ib: %w", err)
	}
	if p.Wait == "event" {
		if t.ch, err = t.ctx.NewChannel(); err != nil {
			return fmt.Errorf("ib: %w", err)
		}
	}
	npeers := max(t.size-1, 1)
	if t.cq, err = t.ctx.NewCQ(npeers*(p.Credits+p.Depth)+16, t.ch); err != nil {
		return fmt.Errorf("ib: %w", err)
	}
	t.slot = sys.RoundUp(hdrLen+p.Eager, 64)
	total := sys.RoundUp(2*t.size*p.Credits*t.slot+t.size*ctrlBytes, sys.PageSize)
	if t.mem, err = sys.MapAnon(total, true); err != nil {
		return fmt.Errorf("ib: slots: %w", err)
	}
	if t.mr, err = t.pd.Register(sys.AddressOf(t.mem), len(t.mem), verbs.LocalWrite|verbs.RemoteWrite); err != nil {
		return fmt.Errorf("ib: register %d bytes of slots: %w", len(t.mem), err)
	}
	pd := t.pd
	t.reg = newRegCache(func(addr uintptr, n int) (region, error) {
		m, err := pd.Register(addr, n, verbs.LocalWrite|verbs.RemoteRead|verbs.RemoteWrite)
		if err != nil {
			return nil, fmt.Errorf("ib: %w", err)
		}
		return mrRegion{m}, nil
	})
	return nil
}

// pickPort chooses the device and port: ib.dev (and ib.port) when given.
// Otherwise, of the devices with an active port (or port ib.port), the
// first whose GID (ib.gid, or the one discovery chooses) is on an interface
// of the caller's network namespace (view; nil: not known), else the first
// of them. RDMA devices are shared by every namespace, but a RoCE device
// moves data only through its own netdev: ranks in different namespaces,
// as containers or namespace-hosts, each need the device of their own.
// have lists the devices passed over, for an error.
func pickPort(devs []verbs.Device, p Params, view verbs.NetView) (dev string, port *verbs.Port, have []string) {
	type candidate struct {
		dev  string
		port *verbs.Port
	}
	var cands []candidate
	for _, d := range devs {
		var found *verbs.Port
		for i := range d.Ports {
			q := &d.Ports[i]
			if (p.Port == 0 && q.State == "ACTIVE") || q.Num == p.Port {
				found = q
				break
			}
		}
		if (p.Dev != "" && d.Name != p.Dev) || found == nil {
			have = append(have, d.Name)
			continue
		}
		cands = append(cands, candidate{d.Name, found})
	}
	if len(cands) == 0 {
		return "", nil, have
	}
	if p.Dev == "" && view != nil {
		for _, c := range cands {
			idx := p.GID
			if idx < 0 {
				idx = c.port.Chosen
			}
			if c.port.InView(idx, view) {
				return c.dev, c.port, have
			}
		}
	}
	return cands[0].dev, cands[0].port, have
}

type mrRegion struct{ m *verbs.MR }

func (r mrRegion) Keys() (uint32, uint32) { return r.m.LKey, r.m.RKey }
func (r mrRegion) Close() error           { return r.m.Close() }

// Slot addresses.
func (t *Transport) recvSlot(peer int, i uint32) []byte {
	o := (peer*t.params.Credits + int(i)) * t.slot
	return t.mem[o : o+t.slot]
}

func (t *Transport) sendSlot(peer int, i uint32) []byte {
	o := ((t.size+peer)*t.params.Credits + int(i)) * t.slot
	return t.mem[o : o+t.slot]
}

func (t *Transport) ctrl(peer int) []byte {
	o := 2 * t.size * t.params.Credits * t.slot
	return t.mem[o+peer*ctrlBytes : o+(peer+1)*ctrlBytes]
}

// Connection blob: magic, version, then the rank's port and resources,
// then its queue pair number for every rank.
const (
	blobMagic   = 0x42495447 // "GTIB"
	blobVersion = 1
	blobHead    = 64
)

type connInfo struct {
	lid     uint16
	mtu     verbs.MTU
	ib      bool // InfiniBand link layer: route by LID
	gid     verbs.GID
	psn     uint32
	ctrl    uint64
	ctrlKey uint32
	eager   int
	credits int
	qpn     []uint32
}

func (c *connInfo) marshal() []byte {
	b := make([]byte, blobHead+4*len(c.qpn))
	le := binary.LittleEndian
	le.PutUint32(b[0:], blobMagic)
	le.PutUint16(b[4:], blobVersion)
	le.PutUint16(b[6:], c.lid)
	b[8] = byte(c.mtu)
	if c.ib {
		b[9] = 1
	}
	copy(b[12:28], c.gid[:])
	le.PutUint32(b[28:], c.psn)
	le.PutUint64(b[32:], c.ctrl)
	le.PutUint32(b[40:], c.ctrlKey)
	le.PutUint32(b[44:], uint32(c.eager))
	le.PutUint32(b[48:], uint32(c.credits))
	for i, q := range c.qpn {
		le.PutUint32(b[blobHead+4*i:], q)
	}
	return b
}

func unmarshalConn(b []byte, size int) (connInfo, error) {
	le := binary.LittleEndian
	var c connInfo
	if len(b) != blobHead+4*size || le.Uint32(b) != blobMagic {
		return c, fmt.Errorf("connection info of %d bytes is not gotune ib's for %d ranks", len(b), size)
	}
	if v := le.Uint16(b[4:]); v != blobVersion {
		return c, fmt.Errorf("connection info version %d, want %d (mixed gotune versions?)", v, blobVersion)
	}
	c.lid, c.mtu, c.ib = le.Uint16(b[6:]), verbs.MTU(b[8]), b[9] == 1
	copy(c.gid[:], b[12:28])
	c.psn, c.ctrl, c.ctrlKey = le.Uint32(b[28:]), le.Uint64(b[32:]), le.Uint32(b[40:])
	c.eager, c.credits = int(le.Uint32(b[44:])), int(le.Uint32(b[48:]))
	c.qpn = make([]uint32, size)
	for i := range c.qpn {
		c.qpn[i] = le.Uint32(b[blobHead+4*i:])
	}
	return c, nil
}

// connect creates a queue pair per peer, exchanges connection info and
// moves every queue pair to RTS; a second allgather makes sure every
// peer's queue pair receives before anyone sends.
func (t *Transport) connect() error {
	p := t.params
	pa, err := t.ctx.QueryPort(t.port)
	if err != nil {
		return fmt.Errorf("ib: %w", err)
	}
	gid, err := t.ctx.QueryGID(t.port, t.gidIndex)
	if err != nil {
		return fmt.Errorf("ib: %w", err)
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	me := connInfo{lid: pa.LID, mtu: t.mtu, ib: pa.LinkLayer == "InfiniBand", gid: gid, psn: binary.LittleEndian.Uint32(rnd[:]) & 0xffffff,
		ctrl: uint64(sys.AddressOf(t.ctrl(0))), ctrlKey: t.mr.RKey, eager: p.Eager, credits: p.Credits, qpn: make([]uint32, t.size)}
	for r := 0; r < t.size; r++ {
		if r == t.rank {
			continue
		}
		qp, err := t.pd.NewRCQP(t.cq, t.cq, verbs.QPCaps{SendWR: p.Depth, RecvWR: p.Credits})
		if err != nil {
			return fmt.Errorf("ib: queue pair for rank %d: %w", r, err)
		}
		pe := &peer{qp: qp, sqFree: p.Depth}
		pe.Rank = r
		t.peers[r] = pe
		t.AddPeer(&pe.Peer)
		me.qpn[r] = qp.Num
		if err := qp.Init(t.port, verbs.LocalWrite|verbs.RemoteRead|verbs.RemoteWrite); err != nil {
			return fmt.Errorf("ib: %w", err)
		}
		for i := 0; i < p.Credits; i++ {
			s := t.recvSlot(r, uint32(i))
			if err := qp.PostRecv(wrID(wRecv, r, uint32(i)), sys.AddressOf(s), len(s), t.mr.LKey); err != nil {
				return fmt.Errorf("ib: %w", err)
			}
			pe.sendFree = append(pe.sendFree, uint32(i))
		}
	}
	all, err := t.env.AllGather(me.marshal())
	if err != nil {
		return fmt.Errorf("ib: exchange connection info: %w", err)
	}
	if len(all) != t.size {
		return fmt.Errorf("ib: exchange connection info: %d blobs for %d ranks", len(all), t.size)
	}
	rd := 16
	if a, err := t.ctx.Query(); err == nil {
		rd = max(1, min(rd, a.MaxQPRdAtom, a.MaxQPInitRdAtom))
	}
	for r, pe := range t.peers {
		if pe == nil {
			continue
		}
		c, err := unmarshalConn(all[r], t.size)
		if err != nil {
			return fmt.Errorf("ib: rank %d: %w", r, err)
		}
		if c.eager != p.Eager || c.credits != p.Credits {
			return fmt.Errorf("ib: rank %d has ib.eager=%d ib.credits=%d, rank %d has %d and %d: every rank must use the same", r, c.eager, c.credits, t.rank, p.Eager, p.Credits)
		}
		pe.remoteCtrl, pe.remoteCtrlKey = c.ctrl+uint64(t.rank*ctrlBytes), c.ctrlKey
		rem := verbs.Remote{QPN: c.qpn[t.rank], PSN: c.psn, LID: c.lid, GID: c.gid, Global: !c.ib, SGID: t.gidIndex, MTU: min(t.mtu, c.mtu), RdAtomic: rd}
		if err := pe.qp.ReadyToReceive(rem); err != nil {
			return fmt.Errorf("ib: connect to rank %d: %w", r, err)
		}
		if err := pe.qp.ReadyToSend(me.psn, rd); err != nil {
			return fmt.Errorf("ib: connect to rank %d: %w", r, err)
		}
	}
	if _, err := t.env.AllGather(nil); err != nil {
		return fmt.Errorf("ib: wait for every rank's queue pairs: %w", err)
	}
	return nil
}
