package verbs

/*
#cgo CFLAGS: -O2 -Wall
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/gotune/gotune/internal/sys"
)

// Library is the shared object Load opens.
const Library = "libibverbs.so.1"

var (
	loadOnce sync.Once
	loadErr  error
)

// Load opens libibverbs once; every later call returns the first answer.
// Where it is absent the error matches sys.ErrNotSupported and says
// "libibverbs.so.1 not found".
func Load() error {
	loadOnce.Do(func() { loadErr = loadNamed(Library) })
	return loadErr
}

// loadNamed opens the library called name (tests name one that is absent).
func loadNamed(lib string) error {
	name := C.CString(lib)
	defer C.free(unsafe.Pointer(name))
	if msg := C.gt_load(name); msg != nil {
		if m := C.GoString(msg); strings.HasPrefix(m, "symbol") {
			return sys.NotSupported("InfiniBand verbs", lib+" is too old for gotune", errors.New(m))
		}
		return sys.NotSupported("InfiniBand verbs", lib+" not found (install rdma-core's libibverbs1 and its providers, ibverbs-providers)", errors.New(C.GoString(msg)))
	}
	return nil
}

// errnoErr turns a verbs call's failure into an error: calls that return
// NULL or -1 leave errno (err); post and modify calls return it.
func errnoErr(op string, rc C.int, err error) error {
	if rc > 0 {
		err = syscall.Errno(rc)
	}
	if err == nil {
		err = errors.New("failed (no errno)")
	}
	return fmt.Errorf("%s: %w", op, err)
}

// release destroys *h once with destroy and clears it (every object's
// Close): a second Close, or one of an object never made, does nothing.
func release[T any](h **T, op string, destroy func(*T) (C.int, error)) error {
	if *h == nil {
		return nil
	}
	rc, err := destroy(*h)
	*h = nil
	if rc != 0 {
		return errnoErr(op, rc, err)
	}
	return nil
}

// DeviceNames lists the RDMA devices libibverbs sees, in its order.
func DeviceNames() ([]string, error) {
	var names []string
	err := devices(func(devs []*C.struct_ibv_device) error {
		names = make([]string, len(devs))
		for i, d := range devs {
			names[i] = C.GoString(C.gt_get_device_name(d))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return names, nil
}

// devices loads libibverbs and calls fn with its device list, which is
// freed when fn returns (fn must not keep it).
func devices(fn func(devs []*C.struct_ibv_device) error) error {
	if err := Load(); err != nil {
		return err
	}
	var n C.int
	list, err := C.gt_get_device_list(&n)
	if list == nil {
		return deviceListErr(err)
	}
	defer C.gt_free_device_list(list)
	return fn(unsafe.Slice(list, int(n)))
}

// deviceListErr explains a failed ibv_get_device_list: ENOSYS is a
// kernel without RDMA (no uverbs): no devices, not a failure.
func deviceListErr(err error) error {
	if errors.Is(err, syscall.ENOSYS) {
		return sys.NotSupported("InfiniBand verbs", NoDevices+" (the kernel offers no RDMA verbs: no ib_uverbs)", err)
	}
	return fmt.Errorf("ibv_get_device_list: %w", err)
}

// NoDevices is the reason given when libibverbs loads but sees no device.
const NoDevices = "no RDMA devices"

// Context is an open device.
type Context struct {
	c    *C.struct_ibv_context
	Name string
}

// Open opens the device called name, or the first one when name is "".
// No device, or none of that name, is an ErrNotSupported error.
func Open(name string) (*Context, error) {
	var ctx *Context
	err := devices(func(devs []*C.struct_ibv_device) error {
		if len(devs) == 0 {
			return sys.NotSupported("InfiniBand verbs", NoDevices+" (libibverbs finds none: no HCA, or no provider for it; for Soft-RoCE: rdma link add rxe0 type rxe netdev IFACE)", nil)
		}
		var have []string
		for _, d := range devs {
			dn := C.GoString(C.gt_get_device_name(d))
			have = append(have, dn)
			if name != "" && dn != name {
				continue
			}
			c, err := C.gt_open_device(d)
			if c == nil {
				return errnoErr("ibv_open_device "+dn, 0, err)
			}
			ctx = &Context{c: c, Name: dn}
			return nil
		}
		return sys.NotSupported("RDMA device "+name, fmt.Sprintf("no such device (have %v)", have), nil)
	})
	if err != nil {
		return nil, err
	}
	return ctx, nil
}

// Close closes the device.
func (c *Context) Close() error {
	return release(&c.c, "ibv_close_device", func(h *C.struct_ibv_context) (C.int, error) { rc, err := C.gt_close_device(h); return rc, err })
}

// DeviceAttr are the device limits gotune reads.
type DeviceAttr struct {
	FW              string
	Ports           int
	MaxQPWR         int // work requests a queue may hold
	MaxCQE          int
	MaxMRSize       uint64
	MaxQPRdAtom     int // RDMA reads a QP may have outstanding as initiator
	MaxQPInitRdAtom int
}

// Query reads the device's attributes.
func (c *Context) Query() (DeviceAttr, error) {
	var a C.struct_ibv_device_attr
	if rc, err := C.gt_query_device(c.c, &a); rc != 0 {
		return DeviceAttr{}, errnoErr("ibv_query_device "+c.Name, rc, err)
	}
	return DeviceAttr{
		FW:              C.GoString(&a.fw_ver[0]),
		Ports:           int(a.phys_port_cnt),
		MaxQPWR:         int(a.max_qp_wr),
		MaxCQE:          int(a.max_cqe),
		MaxMRSize:       uint64(a.max_mr_size),
		MaxQPRdAtom:     int(a.max_qp_rd_atom),
		MaxQPInitRdAtom: int(a.max_qp_init_rd_atom),
	}, nil
}

// PortAttr are a port's attributes.
type PortAttr struct {
	State     PortState
	MaxMTU    MTU
	ActiveMTU MTU
	LID       uint16
	GIDTable  int
	LinkLayer string // "InfiniBand", "Ethernet" or "" (unknown)
	MaxMsg    uint32
}

// QueryPort reads port (1-based).
func (c *Context) QueryPort(port int) (PortAttr, error) {
	var a C.struct_ibv_port_attr
	if rc, err := C.gt_query_port(c.c, C.uint8_t(port), &a); rc != 0 {
		return PortAttr{}, errnoErr(fmt.Sprintf("ibv_query_port %s port %d", c.Name, port), rc, err)
	}
	ll := ""
	switch a.link_layer {
	case C.IBV_LINK_LAYER_INFINIBAND:
		ll = "InfiniBand"
	case C.IBV_LINK_LAYER_ETHERNET:
		ll = "Ethernet"
	}
	return PortAttr{
		State: PortState(a.state), MaxMTU: MTU(a.max_mtu), ActiveMTU: MTU(a.active_mtu),
		LID: uint16(a.lid), GIDTable: int(a.gid_tbl_len), LinkLayer: ll, MaxMsg: uint32(a.max_msg_sz),
	}, nil
}

// GID is a 16-byte global identifier.
type GID [16]byte

// QueryGID reads entry idx of port's GID table.
func (c *Context) QueryGID(port, idx int) (GID, error) {
	var g C.union_ibv_gid
	if rc, err := C.gt_query_gid(c.c, C.uint8_t(port), C.int(idx), &g); rc != 0 {
		return GID{}, errnoErr(fmt.Sprintf("ibv_query_gid %s port %d index %d", c.Name, port, idx), rc, err)
	}
	var out GID
	copy(out[:], C.GoBytes(unsafe.Pointer(&g), 16))
	return out, nil
}

// Access are memory-region and queue-pair access flags.
type Access int

const (
	LocalWrite  Access = C.IBV_ACCESS_LOCAL_WRITE
	RemoteWrite Access = C.IBV_ACCESS_REMOTE_WRITE
	RemoteRead  Access = C.IBV_ACCESS_REMOTE_READ
)

// PD is a protection domain.
type PD struct {
	p *C.struct_ibv_pd
	c *Context
}

// AllocPD allocates a protection domain.
func (c *Context) AllocPD() (*PD, error) {
	p, err := C.gt_alloc_pd(c.c)
	if p == nil {
		return nil, errnoErr("ibv_alloc_pd "+c.Name, 0, err)
	}
	return &PD{p: p, c: c}, nil
}

// Close deallocates the protection domain.
func (pd *PD) Close() error {
	return release(&pd.p, "ibv_dealloc_pd", func(h *C.struct_ibv_pd) (C.int, error) { rc, err := C.gt_dealloc_pd(h); return rc, err })
}

// MR is a registered memory region.
type MR struct {
	m          *C.struct_ibv_mr
	Addr       uintptr
	Len        int
	LKey, RKey uint32
}

// Register registers [addr, addr+n): memory outside the Go heap (the
// kernel pins it; the Go heap moves nothing, but registering it would pin
// pages the runtime may release).
func (pd *PD) Register(addr uintptr, n int, access Access) (*MR, error) {
	m, err := C.gt_reg_mr(pd.p, C.uintptr_t(addr), C.size_t(n), C.int(access))
	if m == nil {
		if errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EPERM) {
			err = fmt.Errorf("%w (locked-memory limit? ulimit -l is %s)", err, memlockLimit())
		}
		return nil, errnoErr(fmt.Sprintf("ibv_reg_mr %#x+%d", addr, n), 0, err)
	}
	return &MR{m: m, Addr: addr, Len: n, LKey: uint32(m.lkey), RKey: uint32(m.rkey)}, nil
}

func memlockLimit() string {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "Max locked memory"); ok {
			return strings.Join(strings.Fields(rest), " ")
		}
	}
	return "unknown"
}

// Close deregisters the region.
func (m *MR) Close() error {
	return release(&m.m, fmt.Sprintf("ibv_dereg_mr %#x+%d", m.Addr, m.Len), func(h *C.struct_ibv_mr) (C.int, error) { rc, err := C.gt_dereg_mr(h); return rc, err })
}

// Channel is a completion event channel: a descriptor that becomes
// readable when a CQ armed with RequestNotify gets a completion.
type Channel struct {
	ch *C.struct_ibv_comp_channel
}

// NewChannel creates a completion channel.
func (c *Context) NewChannel() (*Channel, error) {
	ch, err := C.gt_create_comp_channel(c.c)
	if ch == nil {
		return nil, errnoErr("ibv_create_comp_channel", 0, err)
	}
	return &Channel{ch: ch}, nil
}

// FD is the channel's descriptor (poll it for readability, then call
// GetEvent, which then does not block).
func (ch *Channel) FD() int { return int(ch.ch.fd) }

// GetEvent takes one event off the channel (blocking until there is one)
// and acknowledges it.
func (ch *Channel) GetEvent() error {
	var cq *C.struct_ibv_cq
	if rc, err := C.gt_get_cq_event(ch.ch, &cq); rc != 0 {
		return errnoErr("ibv_get_cq_event", rc, err)
	}
	C.gt_ack_cq_events(cq, 1)
	return nil
}

// Close destroys the channel (its CQs first).
func (ch *Channel) Close() error {
	return release(&ch.ch, "ibv_destroy_comp_channel", func(h *C.struct_ibv_comp_channel) (C.int, error) {
		rc, err := C.gt_destroy_comp_channel(h)
		return rc, err
	})
}

// CQ is a completion queue.
type CQ struct {
	cq  *C.struct_ibv_cq
	wcs [16]C.struct_gt_wc
}

// NewCQ creates a queue of at least n entries, reporting to ch when ch is
// not nil.
func (c *Context) NewCQ(n int, ch *Channel) (*CQ, error) {
	var cch *C.struct_ibv_comp_channel
	if ch != nil {
		cch = ch.ch
	}
	cq, err := C.gt_create_cq(c.c, C.int(n), cch)
	if cq == nil {
		return nil, errnoErr(fmt.Sprintf("ibv_create_cq of %d entries", n), 0, err)
	}
	return &CQ{cq: cq}, nil
}

// WC is a work completion.
type WC struct {
	ID     uint64
	Status int // 0: success; StatusString says what else
	Opcode WCOpcode
	Len    int
	QPNum  uint32
}

// WCOpcode is what completed.
type WCOpcode int

const (
	WCSend      WCOpcode = C.IBV_WC_SEND
	WCRDMAWrite WCOpcode = C.IBV_WC_RDMA_WRITE
	WCRDMARead  WCOpcode = C.IBV_WC_RDMA_READ
	WCRecv      WCOpcode = C.IBV_WC_RECV
)

// StatusString is libibverbs' name for a completion status.
func StatusString(status int) string { return C.GoString(C.gt_wc_status_str(C.int(status))) }

// Poll takes up to len(out) (at most 16) completions; it returns how many.
func (q *CQ) Poll(out []WC) (int, error) {
	n := min(len(out), len(q.wcs))
	got := int(C.gt_poll_cq(q.cq, C.int(n), &q.wcs[0]))
	if got < 0 {
		return 0, fmt.Errorf("ibv_poll_cq: %d", got)
	}
	for i := 0; i < got; i++ {
		w := &q.wcs[i]
		out[i] = WC{ID: uint64(w.wr_id), Status: int(w.status), Opcode: WCOpcode(w.opcode), Len: int(w.byte_len), QPNum: uint32(w.qp_num)}
	}
	return got, nil
}

// RequestNotify arms the CQ: its next completion raises an event on its channel.
func (q *CQ) RequestNotify() error {
	if rc := C.gt_req_notify_cq(q.cq); rc != 0 {
		return errnoErr("ibv_req_notify_cq", rc, nil)
	}
	return nil
}

// Close destroys the queue.
func (q *CQ) Close() error {
	return release(&q.cq, "ibv_destroy_cq", func(h *C.struct_ibv_cq) (C.int, error) { rc, err := C.gt_destroy_cq(h); return rc, err })
}

// QP is a reliable-connected queue pair.
type QP struct {
	qp   *C.struct_ibv_qp
	Num  uint32
	port int
}

// QPCaps size a queue pair.
type QPCaps struct {
	SendWR, RecvWR, MaxInline int
}

// NewRCQP creates a reliable-connected queue pair on the two CQs.
func (pd *PD) NewRCQP(send, recv *CQ, caps QPCaps) (*QP, error) {
	qp, err := C.gt_create_rc_qp(pd.p, send.cq, recv.cq, C.uint32_t(caps.SendWR), C.uint32_t(caps.RecvWR), C.uint32_t(caps.MaxInline))
	if qp == nil {
		return nil, errnoErr(fmt.Sprintf("ibv_create_qp (RC, %d send and %d receive requests, %d inline)", caps.SendWR, caps.RecvWR, caps.MaxInline), 0, err)
	}
	return &QP{qp: qp, Num: uint32(qp.qp_num)}, nil
}

// Init moves the queue pair to INIT on port with the remote access it grants.
func (q *QP) Init(port int, access Access) error {
	q.port = port
	if rc, err := C.gt_qp_init(q.qp, C.uint8_t(port), C.int(access)); rc != 0 {
		return errnoErr(fmt.Sprintf("QP %d to INIT on port %d", q.Num, port), rc, err)
	}
	return nil
}

// Remote is what a queue pair needs to know of its peer to connect.
type Remote struct {
	QPN, PSN uint32
	LID      uint16
	GID      GID
	Global   bool // route by GID (RoCE, or IB across subnets)
	SGID     int  // our GID index for the route
	MTU      MTU
	RdAtomic int // RDMA reads in flight, each way
}

// ReadyToReceive moves the queue pair to RTR, connected to r.
func (q *QP) ReadyToReceive(r Remote) error {
	g := C.CBytes(r.GID[:])
	defer C.free(g)
	global := 0
	if r.Global {
		global = 1
	}
	rc, err := C.gt_qp_rtr(q.qp, C.uint8_t(q.port), C.uint32_t(r.QPN), C.uint32_t(r.PSN), C.uint16_t(r.LID),
		(*C.uint8_t)(g), C.int(global), C.int(r.SGID), C.int(r.MTU), C.int(r.RdAtomic))
	if rc != 0 {
		return errnoErr(fmt.Sprintf("QP %d to RTR (remote QP %d, LID %d, GID %s, our GID index %d, MTU %d)", q.Num, r.QPN, r.LID, r.GID, r.SGID, r.MTU.Bytes()), rc, err)
	}
	return nil
}

// ReadyToSend moves the queue pair to RTS.
func (q *QP) ReadyToSend(psn uint32, rdAtomic int) error {
	if rc, err := C.gt_qp_rts(q.qp, C.uint32_t(psn), C.int(rdAtomic)); rc != 0 {
		return errnoErr(fmt.Sprintf("QP %d to RTS", q.Num), rc, err)
	}
	return nil
}

// Fail moves the queue pair to ERROR: its outstanding requests complete
// with a flush status.
func (q *QP) Fail() error {
	if rc, err := C.gt_qp_error(q.qp); rc != 0 {
		return errnoErr(fmt.Sprintf("QP %d to ERROR", q.Num), rc, err)
	}
	return nil
}

// Opcode is a send work request's operation.
type Opcode int

const (
	OpSend      Opcode = C.IBV_WR_SEND
	OpRDMAWrite Opcode = C.IBV_WR_RDMA_WRITE
	OpRDMARead  Opcode = C.IBV_WR_RDMA_READ
)

// SendWR is a send-queue work request of one scatter/gather entry.
type SendWR struct {
	ID         uint64
	Op         Opcode
	Addr       uintptr // local buffer (0 with Len 0)
	Len        int
	LKey       uint32
	RemoteAddr uint64 // RDMA read and write
	RKey       uint32
	Signaled   bool // a completion is generated
	Inline     bool // payload copied into the request (Len ≤ the QP's inline size)
}

// PostSend posts one send work request.
func (q *QP) PostSend(w SendWR) error {
	flags := C.int(0)
	if w.Signaled {
		flags |= C.IBV_SEND_SIGNALED
	}
	if w.Inline {
		flags |= C.IBV_SEND_INLINE
	}
	if rc := C.gt_post_send(q.qp, C.uint64_t(w.ID), C.int(w.Op), C.uintptr_t(w.Addr), C.uint32_t(w.Len), C.uint32_t(w.LKey),
		C.uint64_t(w.RemoteAddr), C.uint32_t(w.RKey), 0, flags); rc != 0 {
		return errnoErr(fmt.Sprintf("ibv_post_send on QP %d", q.Num), rc, nil)
	}
	return nil
}

// PostRecv posts one receive of up to n bytes at addr.
func (q *QP) PostRecv(id uint64, addr uintptr, n int, lkey uint32) error {
	if rc := C.gt_post_recv(q.qp, C.uint64_t(id), C.uintptr_t(addr), C.uint32_t(n), C.uint32_t(lkey)); rc != 0 {
		return errnoErr(fmt.Sprintf("ibv_post_recv on QP %d", q.Num), rc, nil)
	}
	return nil
}

// Close destroys the queue pair.
func (q *QP) Close() error {
	return release(&q.qp, "ibv_destroy_qp", func(h *C.struct_ibv_qp) (C.int, error) { rc, err := C.gt_destroy_qp(h); return rc, err })
}

// ForkStatus is libibverbs' fork protection.
type ForkStatus int

const (
	ForkDisabled ForkStatus = C.IBV_FORK_DISABLED // none: a child may take registered pages from the parent
	ForkEnabled  ForkStatus = C.IBV_FORK_ENABLED  // ibv_fork_init: registered ranges are MADV_DONTFORK
	ForkUnneeded ForkStatus = C.IBV_FORK_UNNEEDED // the kernel copies pinned pages for the child at fork
)

func (s ForkStatus) String() string {
	switch s {
	case ForkDisabled:
		return "disabled"
	case ForkEnabled:
		return "enabled (ibv_fork_init: registered memory is MADV_DONTFORK)"
	case ForkUnneeded:
		return "unneeded (the kernel copies pinned pages at fork)"
	}
	return fmt.Sprintf("fork status %d", int(s))
}

// ForkInit calls ibv_fork_init (before any registration to take effect).
func ForkInit() error {
	if err := Load(); err != nil {
		return err
	}
	if rc := C.gt_fork_init(); rc != 0 {
		return errnoErr("ibv_fork_init", rc, nil)
	}
	return nil
}

// Fork reports libibverbs' fork protection.
func Fork() (ForkStatus, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	return ForkStatus(C.gt_fork_status()), nil
}

// ForkHold forks a child that keeps the address space fork gave it (what
// a process that forks during RDMA traffic leaves behind) until release is
// called, which ends the child and reaps it. The child runs no Go code.
// It is the fork hazard's (H7) trigger: readFD and writeFD are a pipe's
// ends; the child waits for end of file on readFD, which comes when the
// caller closes writeFD (the child closes its own copy first).
func ForkHold(readFD, writeFD int) (pid int, err error) {
	p, err := C.gt_fork_hold(C.int(readFD), C.int(writeFD))
	if p < 0 {
		return 0, fmt.Errorf("fork: %w", err)
	}
	return int(p), nil
}
