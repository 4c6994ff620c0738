package cuda

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gotune/gotune/internal/sys"
)

// LibraryEnv names a variable that, when set, is the path of the driver
// library to load instead of libcuda.so.1.
const LibraryEnv = "GOTUNE_LIBCUDA"

// libraryCandidates are tried in order when LibraryEnv is unset: the dynamic
// loader's search first, then where container images mount the driver.
var libraryCandidates = []string{
	"libcuda.so.1",
	"/usr/local/nvidia/lib64/libcuda.so.1",
	"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
	"/usr/lib64/libcuda.so.1",
}

// driver holds the loaded library's entry points (0 when not exported).
type driver struct {
	handle  uintptr
	path    string
	version int // cuDriverGetVersion, e.g. 13000

	cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString uintptr

	cuDeviceGet, cuDeviceGetCount, cuDeviceGetName, cuDeviceGetAttribute uintptr
	cuDeviceTotalMem, cuDeviceGetPCIBusId, cuDeviceCanAccessPeer         uintptr

	cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease         uintptr
	cuCtxSetCurrent, cuCtxGetCurrent, cuCtxSynchronize          uintptr
	cuCtxEnablePeerAccess, cuCtxDisablePeerAccess, cuMemGetInfo uintptr

	cuMemAlloc, cuMemFree, cuMemHostAlloc, cuMemFreeHost        uintptr
	cuMemHostRegister, cuMemHostUnregister, cuMemAllocManaged   uintptr
	cuMemAdviseV2, cuMemAdviseV1, cuPointerGetAttribute         uintptr
	cuDeviceGetDefaultMemPool, cuMemPoolSetAttribute            uintptr
	cuMemPoolGetAttribute, cuMemPoolTrimTo                      uintptr
	cuMemAllocAsync, cuMemFreeAsync                             uintptr
	cuMemcpy, cuMemcpyAsync, cuMemcpyPeerAsync                  uintptr
	cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpyDtoD                    uintptr
	cuMemsetD8, cuMemsetD8Async                                 uintptr
	cuStreamCreate, cuStreamDestroy, cuStreamSynchronize        uintptr
	cuStreamQuery, cuStreamWaitEvent                            uintptr
	cuStreamWriteValue32, cuStreamWaitValue32                   uintptr
	cuMemHostGetDevicePointer                                   uintptr
	cuEventCreate, cuEventDestroy, cuEventRecord, cuEventQuery  uintptr
	cuEventSynchronize, cuEventElapsedTime                      uintptr
	cuIpcGetMemHandle, cuIpcOpenMemHandle, cuIpcCloseMemHandle  uintptr
	cuIpcGetEventHandle, cuIpcOpenEventHandle                   uintptr
	cuModuleLoadDataEx, cuModuleUnload, cuModuleGetFunction     uintptr
	cuLaunchKernel, cuOccupancyMaxActiveBlocksPerMultiprocessor uintptr
	cuFuncGetAttribute                                          uintptr
	cuMemGetAddressRange                                        uintptr
	cuStreamBeginCapture, cuStreamEndCapture                    uintptr
	cuGraphInstantiate, cuGraphLaunch                           uintptr
	cuGraphExecDestroy, cuGraphDestroy                          uintptr
}

// symbol binds one entry point. names are tried in order (the versioned
// export first); a required symbol that is missing makes the driver
// unusable, an optional one only the calls that need it.
type symbol struct {
	dst      *uintptr
	names    []string
	optional bool
}

func (d *driver) symbols() []symbol {
	req := func(dst *uintptr, names ...string) symbol { return symbol{dst: dst, names: names} }
	opt := func(dst *uintptr, names ...string) symbol { return symbol{dst: dst, names: names, optional: true} }
	return []symbol{
		req(&d.cuInit, "cuInit"),
		req(&d.cuDriverGetVersion, "cuDriverGetVersion"),
		req(&d.cuGetErrorName, "cuGetErrorName"),
		req(&d.cuGetErrorString, "cuGetErrorString"),
		req(&d.cuDeviceGet, "cuDeviceGet"),
		req(&d.cuDeviceGetCount, "cuDeviceGetCount"),
		req(&d.cuDeviceGetName, "cuDeviceGetName"),
		req(&d.cuDeviceGetAttribute, "cuDeviceGetAttribute"),
		req(&d.cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
		req(&d.cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId"),
		req(&d.cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer"),
		req(&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
		req(&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
		req(&d.cuCtxSetCurrent, "cuCtxSetCurrent"),
		req(&d.cuCtxGetCurrent, "cuCtxGetCurrent"),
		req(&d.cuCtxSynchronize, "cuCtxSynchronize"),
		req(&d.cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess"),
		req(&d.cuCtxDisablePeerAccess, "cuCtxDisablePeerAccess"),
		req(&d.cuMemGetInfo, "cuMemGetInfo_v2"),
		req(&d.cuMemAlloc, "cuMemAlloc_v2"),
		req(&d.cuMemFree, "cuMemFree_v2"),
		req(&d.cuMemHostAlloc, "cuMemHostAlloc"),
		req(&d.cuMemFreeHost, "cuMemFreeHost"),
		req(&d.cuMemHostRegister, "cuMemHostRegister_v2"),
		req(&d.cuMemHostUnregister, "cuMemHostUnregister"),
		req(&d.cuMemAllocManaged, "cuMemAllocManaged"),
		opt(&d.cuMemAdviseV2, "cuMemAdvise_v2"), // CUDA 12.2+: CUmemLocation by value
		opt(&d.cuMemAdviseV1, "cuMemAdvise"),    // older: a CUdevice
		req(&d.cuPointerGetAttribute, "cuPointerGetAttribute"),
		opt(&d.cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool"), // CUDA 11.2+
		opt(&d.cuMemPoolSetAttribute, "cuMemPoolSetAttribute"),
		opt(&d.cuMemPoolGetAttribute, "cuMemPoolGetAttribute"),
		opt(&d.cuMemPoolTrimTo, "cuMemPoolTrimTo"),
		opt(&d.cuMemAllocAsync, "cuMemAllocAsync"),
		opt(&d.cuMemFreeAsync, "cuMemFreeAsync"),
		req(&d.cuMemcpy, "cuMemcpy"),
		req(&d.cuMemcpyAsync, "cuMemcpyAsync"),
		req(&d.cuMemcpyPeerAsync, "cuMemcpyPeerAsync"),
		req(&d.cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
		req(&d.cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
		req(&d.cuMemcpyDtoD, "cuMemcpyDtoD_v2"),
		req(&d.cuMemsetD8, "cuMemsetD8_v2"),
		req(&d.cuMemsetD8Async, "cuMemsetD8Async"),
		req(&d.cuStreamCreate, "cuStreamCreate"),
		req(&d.cuStreamDestroy, "cuStreamDestroy_v2"),
		req(&d.cuStreamSynchronize, "cuStreamSynchronize"),
		req(&d.cuStreamQuery, "cuStreamQuery"),
		req(&d.cuStreamWaitEvent, "cuStreamWaitEvent"),
		opt(&d.cuStreamWriteValue32, "cuStreamWriteValue32_v2", "cuStreamWriteValue32"), // stream memory operations, CUDA 11.7+ without a device attribute
		opt(&d.cuStreamWaitValue32, "cuStreamWaitValue32_v2", "cuStreamWaitValue32"),
		opt(&d.cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
		req(&d.cuEventCreate, "cuEventCreate"),
		req(&d.cuEventDestroy, "cuEventDestroy_v2"),
		req(&d.cuEventRecord, "cuEventRecord"),
		req(&d.cuEventQuery, "cuEventQuery"),
		req(&d.cuEventSynchronize, "cuEventSynchronize"),
		req(&d.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
		req(&d.cuIpcGetMemHandle, "cuIpcGetMemHandle"),
		req(&d.cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"),
		req(&d.cuIpcCloseMemHandle, "cuIpcCloseMemHandle"),
		req(&d.cuIpcGetEventHandle, "cuIpcGetEventHandle"),
		req(&d.cuIpcOpenEventHandle, "cuIpcOpenEventHandle"),
		req(&d.cuModuleLoadDataEx, "cuModuleLoadDataEx"),
		req(&d.cuModuleUnload, "cuModuleUnload"),
		req(&d.cuModuleGetFunction, "cuModuleGetFunction"),
		req(&d.cuLaunchKernel, "cuLaunchKernel"),
		req(&d.cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
		req(&d.cuFuncGetAttribute, "cuFuncGetAttribute"),
		req(&d.cuMemGetAddressRange, "cuMemGetAddressRange_v2"),
		opt(&d.cuStreamBeginCapture, "cuStreamBeginCapture_v2"), // stream capture: CUDA 10.1+
		opt(&d.cuStreamEndCapture, "cuStreamEndCapture"),
		opt(&d.cuGraphInstantiate, "cuGraphInstantiateWithFlags"), // CUDA 11.4+
		opt(&d.cuGraphLaunch, "cuGraphLaunch"),
		opt(&d.cuGraphExecDestroy, "cuGraphExecDestroy"),
		opt(&d.cuGraphDestroy, "cuGraphDestroy"),
	}
}

var (
	loadOnce  sync.Once
	drv       *driver // set once Load succeeded: &table
	loadErr   error
	published atomic.Pointer[driver] // drv, readable without Load
	// table is the loaded driver. Its fields have addresses before Load,
	// so a call names its entry point as &table.cuX (invoke) and reads it
	// only once Load has succeeded.
	table driver
)

// Load loads and initialises the driver once; later calls return the first
// call's result. Every entry point calls it, so calling it first is only
// needed to ask "is CUDA here?". Its error matches ErrNotSupported when the
// library is absent, too old, or finds no device.
func Load() error {
	loadOnce.Do(func() {
		var d *driver
		if d, loadErr = load(); loadErr == nil {
			table = *d
			drv = &table
			published.Store(drv)
		}
	})
	return loadErr
}

// lib returns the loaded driver or Load's error.
func lib() (*driver, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	return drv, nil
}

// loaded returns the driver if Load has succeeded, without loading it.
func loaded() *driver { return published.Load() }

func load() (*driver, error) {
	paths := libraryCandidates
	if p := os.Getenv(LibraryEnv); p != "" {
		paths = []string{p}
	}
	var handle uintptr
	var path string
	var first error
	for _, p := range paths {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			handle, path = h, p
			break
		}
		if first == nil {
			first = err
		}
	}
	if handle == 0 {
		// The fallback paths fail the same way; the first error says why.
		return nil, notSupported("CUDA driver", paths[0]+" not found: "+first.Error(), nil)
	}
	d := &driver{handle: handle, path: path}
	for _, s := range d.symbols() {
		for _, name := range s.names {
			if p, err := purego.Dlsym(handle, name); err == nil && p != 0 {
				*s.dst = p
				break
			}
		}
		if *s.dst == 0 && !s.optional {
			return nil, notSupported("CUDA driver", path+" lacks "+s.names[0]+" (driver too old)", nil)
		}
	}
	if d.cuMemAdviseV2 == 0 && d.cuMemAdviseV1 == 0 {
		return nil, notSupported("CUDA driver", path+" lacks cuMemAdvise (driver too old)", nil)
	}
	if r, _, _ := purego.SyscallN(d.cuInit, 0); uint32(r) != 0 {
		err := d.newError(r, "cuInit")
		return nil, notSupported("CUDA driver", "cuInit failed", err)
	}
	var v int32
	if r, _, _ := purego.SyscallN(d.cuDriverGetVersion, uintptr(unsafe.Pointer(&v))); uint32(r) == 0 {
		d.version = int(v)
	}
	var n int32
	if r, _, _ := purego.SyscallN(d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n))); uint32(r) != 0 {
		return nil, notSupported("CUDA driver", "cuDeviceGetCount failed", d.newError(r, "cuDeviceGetCount"))
	} else if n == 0 {
		return nil, notSupported("CUDA driver", "no CUDA device", nil)
	}
	return d, nil
}

// newError is newError before the driver is published (during load).
func (d *driver) newError(r uintptr, op string) error {
	code := int(int32(uint32(r)))
	e := &Error{Code: code, Op: op}
	e.Name, e.Msg = d.errorStrings(code)
	if e.Name == "" {
		e.Name = codeNames[code]
	}
	return e
}

// errorStrings asks the driver for a code's name and description.
func (d *driver) errorStrings(code int) (name, msg string) {
	var p *byte
	if r, _, _ := purego.SyscallN(d.cuGetErrorName, uintptr(uint32(int32(code))), uintptr(unsafe.Pointer(&p))); uint32(r) == 0 {
		name = sys.GoString(p)
	}
	p = nil
	if r, _, _ := purego.SyscallN(d.cuGetErrorString, uintptr(uint32(int32(code))), uintptr(unsafe.Pointer(&p))); uint32(r) == 0 {
		msg = sys.GoString(p)
	}
	return name, msg
}

// cString returns b up to its first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// DriverVersion returns the driver's CUDA version, e.g. 13000 for 13.0.
func DriverVersion() (int, error) {
	d, err := lib()
	if err != nil {
		return 0, err
	}
	return d.version, nil
}

// LibraryPath returns the path the driver was loaded from.
func LibraryPath() (string, error) {
	d, err := lib()
	if err != nil {
		return "", err
	}
	return d.path, nil
}

// DeviceCount returns the number of CUDA devices.
func DeviceCount() (int, error) {
	d, err := lib()
	if err != nil {
		return 0, err
	}
	var n int32
	if r, _, _ := purego.SyscallN(d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n))); uint32(r) != 0 {
		return 0, newError(r, "cuDeviceGetCount")
	}
	return int(n), nil
}

// argv is a SyscallN argument block. purego.SyscallN marks its variadic
// arguments as escaping (go:uintptrescapes), so a fresh argument list costs a
// heap allocation per call; passing a pooled block's slice costs none.
type argv struct{ a [16]uintptr }

var argPool = sync.Pool{New: func() any { return new(argv) }}

// call calls fn with integer arguments and returns the raw result register.
// The arguments must not be Go pointers converted to uintptr (nothing would
// keep their objects alive or in place): device pointers, handles, sizes,
// and addresses of memory outside the Go heap or of objects the caller pins
// or keeps alive across the call.
func call(fn uintptr, args ...uintptr) uintptr {
	v := argPool.Get().(*argv)
	n := copy(v.a[:], args)
	r, _, _ := purego.SyscallN(fn, v.a[:n]...)
	argPool.Put(v)
	return r
}

// result converts a raw return register to nil or an *Error. Hot paths call
// it only after checking the register themselves, so success costs nothing.
func result(r uintptr, op string) error {
	if uint32(r) == 0 {
		return nil
	}
	return newError(r, op)
}

// invoke calls the entry point *fn (a field of table) with args, under
// call's rules, once the driver is loaded; a failure is an *Error for op.
// It allocates nothing.
func invoke(fn *uintptr, op string, args ...uintptr) error {
	if err := Load(); err != nil {
		return err
	}
	return result(call(*fn, args...), op)
}

// invokeSized is invoke for an operation on n bytes: its error names op
// and the size, formatted only on failure, so success allocates nothing.
func invokeSized(fn *uintptr, op string, n int, args ...uintptr) error {
	if err := Load(); err != nil {
		return err
	}
	if r := call(*fn, args...); uint32(r) != 0 {
		return newError(r, op+" "+Size(n))
	}
	return nil
}

// invokeOut is invoke for a call that passes Go memory (an out-parameter)
// as uintptr(unsafe.Pointer(&v)), converted in the call expression: as for
// purego.SyscallN, that memory is moved to the heap and kept alive until
// the call returns.
//
//go:uintptrescapes
func invokeOut(fn *uintptr, op string, args ...uintptr) error {
	if err := Load(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(*fn, args...)
	return result(r, op)
}

// release clears the handle *h and destroys what it held with the entry
// point *fn: a handle's Destroy, which a second call finds cleared.
func release(h, fn *uintptr, op string) error {
	if err := Load(); err != nil {
		return err
	}
	v := *h
	*h = 0
	return result(call(*fn, v), op)
}

// ready calls a query entry point (*fn) on handle h: true when the work is
// done, false while CUDA_ERROR_NOT_READY. It allocates nothing.
func ready(fn *uintptr, h uintptr, op string) (bool, error) {
	if err := Load(); err != nil {
		return false, err
	}
	switch r := uint32(call(*fn, h)); r {
	case 0:
		return true, nil
	case CodeNotReady:
		return false, nil
	default:
		return false, newError(uintptr(r), op)
	}
}

var errNoSymbol = errors.New("entry point not exported by this driver")

// needSymbol returns ErrNotSupported when an optional entry point is absent.
func needSymbol(p uintptr, name string) error {
	if p == 0 {
		return notSupported(name, "not exported by this driver (too old)", errNoSymbol)
	}
	return nil
}
