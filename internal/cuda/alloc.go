package cuda

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Allocation is the device allocation an address falls in: what an IPC
// handle names (the whole allocation, from its base) and the identity that
// tells a reused address from the allocation once seen there.
type Allocation struct {
	Base     uintptr
	Size     int
	BufferID uint64 // unique per allocation for the process's lifetime
}

// pointerAttrBufferID is CU_POINTER_ATTRIBUTE_BUFFER_ID (cuda.h).
const pointerAttrBufferID = 7

// AllocationOf returns the device allocation holding p
// (cuMemGetAddressRange and the pointer's buffer id).
func AllocationOf(p uintptr) (Allocation, error) {
	var a Allocation
	d, err := lib()
	if err != nil {
		return a, err
	}
	var base, size uintptr
	if r, _, _ := purego.SyscallN(d.cuMemGetAddressRange, uintptr(unsafe.Pointer(&base)), uintptr(unsafe.Pointer(&size)), p); uint32(r) != 0 {
		return a, newError(r, fmt.Sprintf("cuMemGetAddressRange %#x", p))
	}
	id, err := BufferID(p)
	if err != nil {
		return a, err
	}
	return Allocation{Base: base, Size: int(size), BufferID: id}, nil
}

// BufferID returns the driver's id of the allocation holding p: an address
// freed and allocated again gets a new one.
func BufferID(p uintptr) (uint64, error) {
	d, err := lib()
	if err != nil {
		return 0, err
	}
	var id uint64
	if r, _, _ := purego.SyscallN(d.cuPointerGetAttribute, uintptr(unsafe.Pointer(&id)), pointerAttrBufferID, p); uint32(r) != 0 {
		return 0, newError(r, fmt.Sprintf("cuPointerGetAttribute buffer id %#x", p))
	}
	return id, nil
}

// IPCHandleOf returns the IPC handle of the device allocation whose base is
// base (cuIpcGetMemHandle).
func IPCHandleOf(base uintptr) (IPCMemHandle, error) {
	var h IPCMemHandle
	d, err := lib()
	if err != nil {
		return h, err
	}
	if r, _, _ := purego.SyscallN(d.cuIpcGetMemHandle, uintptr(unsafe.Pointer(&h)), base); uint32(r) != 0 {
		return h, newError(r, fmt.Sprintf("cuIpcGetMemHandle %#x", base))
	}
	return h, nil
}
