package cuda

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// IPCHandleSize is CU_IPC_HANDLE_SIZE.
const IPCHandleSize = 64

// IPCMemHandle is a CUipcMemHandle: an opaque 64-byte value naming a device
// allocation, meaningful in another process on the same node.
type IPCMemHandle [IPCHandleSize]byte

// IPCEventHandle is a CUipcEventHandle, likewise for an interprocess event.
type IPCEventHandle [IPCHandleSize]byte

func (h IPCMemHandle) String() string   { return hex.EncodeToString(h[:]) }
func (h IPCEventHandle) String() string { return hex.EncodeToString(h[:]) }

// ParseIPCMemHandle parses the hex form String writes.
func ParseIPCMemHandle(s string) (IPCMemHandle, error) {
	var h IPCMemHandle
	return h, parseHandle(h[:], s)
}

// ParseIPCEventHandle parses the hex form String writes.
func ParseIPCEventHandle(s string) (IPCEventHandle, error) {
	var h IPCEventHandle
	return h, parseHandle(h[:], s)
}

func parseHandle(dst []byte, s string) error {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != IPCHandleSize {
		return fmt.Errorf("parse IPC handle %.16q...: want %d hex-encoded bytes", s, IPCHandleSize)
	}
	copy(dst, b)
	return nil
}

// handleWords splits a handle into the eight eightbytes that are copied onto
// the stack when it is passed by value (see the package documentation).
func handleWords(h *[IPCHandleSize]byte) (w [8]uintptr) {
	for i := range w {
		w[i] = uintptr(binary.LittleEndian.Uint64(h[8*i:]))
	}
	return w
}

// ipcMemLazyEnablePeerAccess is CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS.
const ipcMemLazyEnablePeerAccess = 0x1

// IPCHandle returns the IPC handle of a device allocation (MemDevice; the
// driver refuses other kinds).
func (b *Buffer) IPCHandle() (IPCMemHandle, error) {
	var h IPCMemHandle
	err := invokeOut(&table.cuIpcGetMemHandle, fmt.Sprintf("cuIpcGetMemHandle %s %s", b.kind, Size(b.n)), uintptr(unsafe.Pointer(&h)), b.ptr)
	return h, err
}

// OpenIPC maps another process's device allocation of n bytes into the
// bound context (x's), enabling peer access lazily when it lives on another
// device. Free on the result closes the mapping.
func (x *Device) OpenIPC(h IPCMemHandle, n int) (*Buffer, error) {
	d, err := lib()
	if err != nil {
		return nil, err
	}
	var p uintptr
	r := callOpenMemHandle(d.cuIpcOpenMemHandle, &p, (*[IPCHandleSize]byte)(&h), ipcMemLazyEnablePeerAccess)
	if uint32(r) != 0 {
		return nil, newError(r, fmt.Sprintf("cuIpcOpenMemHandle on cuda%d", x.Ordinal))
	}
	return &Buffer{kind: MemDevice, ptr: p, n: n, ipc: true, dev: x}, nil
}

// IPCHandle returns the IPC handle of an event created with
// EventInterprocess|EventDisableTiming.
func (e *Event) IPCHandle() (IPCEventHandle, error) {
	var h IPCEventHandle
	err := invokeOut(&table.cuIpcGetEventHandle, "cuIpcGetEventHandle", uintptr(unsafe.Pointer(&h)), e.h)
	return h, err
}

// OpenIPCEvent opens another process's interprocess event in the bound
// context. Destroy on the result releases it.
func OpenIPCEvent(h IPCEventHandle) (*Event, error) {
	d, err := lib()
	if err != nil {
		return nil, err
	}
	var ev uintptr
	r := callOpenEventHandle(d.cuIpcOpenEventHandle, &ev, (*[IPCHandleSize]byte)(&h))
	if uint32(r) != 0 {
		return nil, newError(r, "cuIpcOpenEventHandle")
	}
	return &Event{h: ev}, nil
}

// callOpenMemHandle calls fn, of cuIpcOpenMemHandle_v2's shape
// CUresult (CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags),
// and returns the raw result register.
//
// System V x86-64: pdptr is INTEGER and takes RDI; the 64-byte handle is
// larger than two eightbytes, so it is of class MEMORY, copied onto the stack
// and consuming no register; Flags, the next INTEGER, takes RSI. SyscallN
// puts its first six arguments in RDI, RSI, RDX, RCX, R8 and R9 and the rest
// on the stack from 0(SP) up, so RDX..R9 are padded with zeros and the
// handle's eight words are arguments 7 to 14.
func callOpenMemHandle(fn uintptr, pdptr *uintptr, h *[IPCHandleSize]byte, flags uint32) uintptr {
	w := handleWords(h)
	r, _, _ := purego.SyscallN(fn,
		uintptr(unsafe.Pointer(pdptr)), uintptr(flags), 0, 0, 0, 0,
		w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7])
	return r
}

// callOpenEventHandle calls fn, of cuIpcOpenEventHandle's shape
// CUresult (CUevent *phEvent, CUipcEventHandle handle): phEvent in RDI, the
// handle (class MEMORY) on the stack, RSI..R9 padding.
func callOpenEventHandle(fn uintptr, phEvent *uintptr, h *[IPCHandleSize]byte) uintptr {
	w := handleWords(h)
	r, _, _ := purego.SyscallN(fn,
		uintptr(unsafe.Pointer(phEvent)), 0, 0, 0, 0, 0,
		w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7])
	return r
}
