package cuda

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Device attributes (CUdevice_attribute, cuda.h).
const (
	AttrMaxThreadsPerBlock         = 1
	AttrMultiprocessorCount        = 16
	AttrPCIBusID                   = 33
	AttrPCIDeviceID                = 34
	AttrL2CacheSize                = 38
	AttrMaxThreadsPerMultiproc     = 39
	AttrAsyncEngineCount           = 40
	AttrUnifiedAddressing          = 41
	AttrPCIDomainID                = 50
	AttrComputeCapabilityMajor     = 75
	AttrComputeCapabilityMinor     = 76
	AttrManagedMemory              = 83
	AttrConcurrentManagedAccess    = 89
	AttrHostRegisterSupported      = 99
	AttrMaxBlocksPerMultiprocessor = 106
	AttrMemoryPoolsSupported       = 115
	AttrIPCEventSupported          = 125
)

// Info describes a device, read once by Open.
type Info struct {
	Ordinal                 int
	Name                    string // "NVIDIA H200"
	PCIBusID                string // "0000:19:00.0", as cuDeviceGetPCIBusId writes it
	SMs                     int    // multiprocessors
	Major, Minor            int    // compute capability
	TotalMem                uint64 // bytes
	UnifiedAddressing       bool
	ManagedMemory           bool
	ConcurrentManagedAccess bool
	MemoryPools             bool // cuMemAllocAsync supported
	AsyncEngines            int  // copy engines
	MaxThreadsPerBlock      int
	MaxThreadsPerSM         int
}

// Device is one CUDA device with a retained primary context.
type Device struct {
	Info
	dev int32   // CUdevice
	ctx uintptr // CUcontext: the primary context
}

// Open retains the primary context of device ordinal and reads its
// attributes. It does not make the context current: call Bind on the locked
// thread that will use the device. Close releases the context.
func Open(ordinal int) (*Device, error) {
	d, err := lib()
	if err != nil {
		return nil, err
	}
	var dev int32
	if r, _, _ := purego.SyscallN(d.cuDeviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(ordinal)); uint32(r) != 0 {
		return nil, newError(r, fmt.Sprintf("cuDeviceGet %d", ordinal))
	}
	x := &Device{dev: dev}
	x.Ordinal = ordinal
	if err := x.readInfo(d); err != nil {
		return nil, err
	}
	var ctx uintptr
	if r, _, _ := purego.SyscallN(d.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&ctx)), uintptr(dev)); uint32(r) != 0 {
		return nil, newError(r, fmt.Sprintf("cuDevicePrimaryCtxRetain %d", ordinal))
	}
	x.ctx = ctx
	return x, nil
}

func (x *Device) readInfo(d *driver) error {
	var name [256]byte
	if r, _, _ := purego.SyscallN(d.cuDeviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(x.dev)); uint32(r) != 0 {
		return newError(r, "cuDeviceGetName")
	}
	x.Name = cString(name[:])
	var bus [64]byte
	if r, _, _ := purego.SyscallN(d.cuDeviceGetPCIBusId, uintptr(unsafe.Pointer(&bus[0])), uintptr(len(bus)), uintptr(x.dev)); uint32(r) != 0 {
		return newError(r, "cuDeviceGetPCIBusId")
	}
	x.PCIBusID = cString(bus[:])
	var total uint64
	if r, _, _ := purego.SyscallN(d.cuDeviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(x.dev)); uint32(r) != 0 {
		return newError(r, "cuDeviceTotalMem")
	}
	x.TotalMem = total
	// A flag newer than the driver reads as absent (CUDA_ERROR_INVALID_VALUE).
	for _, a := range []struct {
		attr int
		n    *int  // an integer attribute
		flag *bool // or a flag
	}{
		{AttrMultiprocessorCount, &x.SMs, nil},
		{AttrComputeCapabilityMajor, &x.Major, nil},
		{AttrComputeCapabilityMinor, &x.Minor, nil},
		{AttrAsyncEngineCount, &x.AsyncEngines, nil},
		{AttrMaxThreadsPerBlock, &x.MaxThreadsPerBlock, nil},
		{AttrMaxThreadsPerMultiproc, &x.MaxThreadsPerSM, nil},
		{AttrUnifiedAddressing, nil, &x.UnifiedAddressing},
		{AttrManagedMemory, nil, &x.ManagedMemory},
		{AttrConcurrentManagedAccess, nil, &x.ConcurrentManagedAccess},
		{AttrMemoryPoolsSupported, nil, &x.MemoryPools},
	} {
		v, err := x.Attribute(a.attr)
		switch {
		case err != nil && a.flag != nil && IsCode(err, CodeInvalidValue):
		case err != nil:
			return err
		case a.flag != nil:
			*a.flag = v != 0
		default:
			*a.n = v
		}
	}
	return nil
}

// Attribute returns a CUdevice_attribute of the device (Attr... constants).
func (x *Device) Attribute(attr int) (int, error) {
	d, err := lib()
	if err != nil {
		return 0, err
	}
	var v int32
	if r, _, _ := purego.SyscallN(d.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(attr), uintptr(x.dev)); uint32(r) != 0 {
		return 0, newError(r, fmt.Sprintf("cuDeviceGetAttribute %d", attr))
	}
	return int(v), nil
}

func (x *Device) String() string {
	return fmt.Sprintf("cuda%d %s (sm_%d%d, %d SMs, %s, %s)", x.Ordinal, x.Name, x.Major, x.Minor, x.SMs, Size(int(x.TotalMem)), x.PCIBusID)
}

// Context returns the primary context's handle (CUcontext).
func (x *Device) Context() uintptr { return x.ctx }

// Handle returns the CUdevice.
func (x *Device) Handle() int { return int(x.dev) }

// Bind makes the device's primary context current on the calling OS thread.
// The caller must have called runtime.LockOSThread: the binding belongs to
// the thread, and a goroutine that migrates leaves it behind. Every
// goroutine that calls the driver binds for itself: a new goroutine (a
// subtest's too) starts on a thread where no context is current, and calls
// there fail with CUDA_ERROR_INVALID_CONTEXT.
func (x *Device) Bind() error {
	d, err := lib()
	if err != nil {
		return err
	}
	if r, _, _ := purego.SyscallN(d.cuCtxSetCurrent, x.ctx); uint32(r) != 0 {
		return newError(r, fmt.Sprintf("cuCtxSetCurrent cuda%d", x.Ordinal))
	}
	return nil
}

// Unbind makes no context current on the calling thread.
func Unbind() error {
	d, err := lib()
	if err != nil {
		return err
	}
	return result(call(d.cuCtxSetCurrent, 0), "cuCtxSetCurrent nil")
}

// Bound reports whether x's context is current on the calling thread.
func (x *Device) Bound() (bool, error) {
	d, err := lib()
	if err != nil {
		return false, err
	}
	var ctx uintptr
	if r, _, _ := purego.SyscallN(d.cuCtxGetCurrent, uintptr(unsafe.Pointer(&ctx))); uint32(r) != 0 {
		return false, newError(r, "cuCtxGetCurrent")
	}
	return ctx == x.ctx, nil
}

// Close releases the primary context retained by Open. The context lives on
// while other retainers (another Open, another library) hold it.
func (x *Device) Close() error {
	if x == nil || x.ctx == 0 {
		return nil
	}
	d, err := lib()
	if err != nil {
		return err
	}
	x.ctx = 0
	return result(call(d.cuDevicePrimaryCtxRelease, uintptr(x.dev)), "cuDevicePrimaryCtxRelease")
}

// Synchronize waits for all work in the bound context (cuCtxSynchronize).
func Synchronize() error {
	d, err := lib()
	if err != nil {
		return err
	}
	return result(call(d.cuCtxSynchronize), "cuCtxSynchronize")
}

// MemInfo returns the free and total memory of the bound context's device.
func MemInfo() (free, total uint64, err error) {
	d, err := lib()
	if err != nil {
		return 0, 0, err
	}
	if r, _, _ := purego.SyscallN(d.cuMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total))); uint32(r) != 0 {
		return 0, 0, newError(r, "cuMemGetInfo")
	}
	return free, total, nil
}

// CanAccessPeer reports whether x can map peer's memory (cuDeviceCanAccessPeer).
func (x *Device) CanAccessPeer(peer *Device) (bool, error) {
	d, err := lib()
	if err != nil {
		return false, err
	}
	var ok int32
	if r, _, _ := purego.SyscallN(d.cuDeviceCanAccessPeer, uintptr(unsafe.Pointer(&ok)), uintptr(x.dev), uintptr(peer.dev)); uint32(r) != 0 {
		return false, newError(r, fmt.Sprintf("cuDeviceCanAccessPeer cuda%d->cuda%d", x.Ordinal, peer.Ordinal))
	}
	return ok != 0, nil
}

// EnablePeerAccess lets the bound context (which must be x's) access peer's
// memory. Access already enabled is not an error.
func (x *Device) EnablePeerAccess(peer *Device) error {
	d, err := lib()
	if err != nil {
		return err
	}
	r := call(d.cuCtxEnablePeerAccess, peer.ctx, 0)
	if uint32(r) == 0 || uint32(r) == CodePeerAccessAlreadyEnabled {
		return nil
	}
	return newError(r, fmt.Sprintf("cuCtxEnablePeerAccess cuda%d->cuda%d", x.Ordinal, peer.Ordinal))
}

// DisablePeerAccess undoes EnablePeerAccess; access not enabled is not an
// error.
func (x *Device) DisablePeerAccess(peer *Device) error {
	d, err := lib()
	if err != nil {
		return err
	}
	r := call(d.cuCtxDisablePeerAccess, peer.ctx)
	if uint32(r) == 0 || uint32(r) == CodePeerAccessNotEnabled {
		return nil
	}
	return newError(r, fmt.Sprintf("cuCtxDisablePeerAccess cuda%d->cuda%d", x.Ordinal, peer.Ordinal))
}
