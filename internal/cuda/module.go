package cuda

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Module is a loaded CUmodule.
type Module struct {
	h   uintptr
	Log string // the JIT compiler's information log, if it wrote one
}

// CUjit_option values used by LoadModule (cuda.h).
const (
	jitInfoLogBuffer          = 3
	jitInfoLogBufferSizeBytes = 4
	jitErrorLogBuffer         = 5
	jitErrorLogBufferSize     = 6
)

const jitLogSize = 8192

// jitBlock holds cuModuleLoadDataEx's option arrays and log buffers. The
// driver reads the arrays and writes the logs through pointers stored in
// them, so the block is pinned for the call.
type jitBlock struct {
	opts [4]int32   // CUjit_option
	vals [4]uintptr // void*: a buffer's address, or a size in the pointer's bits
	info [jitLogSize]byte
	errs [jitLogSize]byte
}

// LoadModule loads a module into the bound context from PTX text (JIT
// compiled by the driver for the device) or a cubin/fatbin image
// (cuModuleLoadDataEx). A failure carries the JIT compiler's error log.
func LoadModule(image []byte) (*Module, error) {
	d, err := lib()
	if err != nil {
		return nil, err
	}
	if len(image) == 0 {
		return nil, fmt.Errorf("load module: empty image")
	}
	// PTX is text the driver reads up to a NUL.
	img := make([]byte, len(image)+1)
	copy(img, image)

	jb := new(jitBlock)
	var pin runtime.Pinner
	pin.Pin(jb)
	defer pin.Unpin()
	jb.opts = [4]int32{jitInfoLogBuffer, jitInfoLogBufferSizeBytes, jitErrorLogBuffer, jitErrorLogBufferSize}
	jb.vals = [4]uintptr{uintptr(unsafe.Pointer(&jb.info[0])), jitLogSize, uintptr(unsafe.Pointer(&jb.errs[0])), jitLogSize}

	var h uintptr
	r, _, _ := purego.SyscallN(d.cuModuleLoadDataEx, uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(&img[0])),
		uintptr(len(jb.opts)), uintptr(unsafe.Pointer(&jb.opts[0])), uintptr(unsafe.Pointer(&jb.vals[0])))
	infoLog := strings.TrimSpace(cString(jb.info[:]))
	if uint32(r) != 0 {
		err := newError(r, "cuModuleLoadDataEx")
		if log := strings.TrimSpace(cString(jb.errs[:])); log != "" {
			return nil, fmt.Errorf("%w\nJIT error log:\n%s", err, log)
		}
		return nil, err
	}
	return &Module{h: h, Log: infoLog}, nil
}

// Unload unloads the module; a second Unload does nothing.
func (m *Module) Unload() error {
	if m == nil || m.h == 0 {
		return nil
	}
	return release(&m.h, &table.cuModuleUnload, "cuModuleUnload")
}

// Function is a kernel (CUfunction) of a loaded module.
type Function struct {
	h    uintptr
	Name string
}

// Function looks a kernel up by its (unmangled .entry) name.
func (m *Module) Function(name string) (*Function, error) {
	d, err := lib()
	if err != nil {
		return nil, err
	}
	cname := append([]byte(name), 0)
	var h uintptr
	if r, _, _ := purego.SyscallN(d.cuModuleGetFunction, uintptr(unsafe.Pointer(&h)), m.h, uintptr(unsafe.Pointer(&cname[0]))); uint32(r) != 0 {
		return nil, newError(r, "cuModuleGetFunction "+name)
	}
	return &Function{h: h, Name: name}, nil
}

// CUfunction_attribute values (cuda.h).
const (
	FuncAttrMaxThreadsPerBlock = 0
	FuncAttrSharedSizeBytes    = 1
	FuncAttrLocalSizeBytes     = 3
	FuncAttrNumRegs            = 4
	FuncAttrPTXVersion         = 5
	FuncAttrBinaryVersion      = 6
)

// Attribute returns a CUfunction_attribute of the kernel.
func (f *Function) Attribute(attr int) (int, error) {
	d, err := lib()
	if err != nil {
		return 0, err
	}
	var v int32
	if r, _, _ := purego.SyscallN(d.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(attr), f.h); uint32(r) != 0 {
		return 0, newError(r, fmt.Sprintf("cuFuncGetAttribute %s %d", f.Name, attr))
	}
	return int(v), nil
}

// MaxActiveBlocksPerSM returns how many blocks of blockSize threads (and
// dynSmem bytes of dynamic shared memory) one multiprocessor holds at once
// (cuOccupancyMaxActiveBlocksPerMultiprocessor).
func (f *Function) MaxActiveBlocksPerSM(blockSize, dynSmem int) (int, error) {
	d, err := lib()
	if err != nil {
		return 0, err
	}
	var n int32
	if r, _, _ := purego.SyscallN(d.cuOccupancyMaxActiveBlocksPerMultiprocessor, uintptr(unsafe.Pointer(&n)), f.h, uintptr(blockSize), uintptr(dynSmem)); uint32(r) != 0 {
		return 0, newError(r, fmt.Sprintf("cuOccupancyMaxActiveBlocksPerMultiprocessor %s block %d", f.Name, blockSize))
	}
	return int(n), nil
}

// Dim3 is a grid or block shape; a zero component counts as 1.
type Dim3 struct{ X, Y, Z int }

func (d Dim3) parts() (x, y, z uintptr) {
	one := func(v int) uintptr {
		if v <= 0 {
			return 1
		}
		return uintptr(v)
	}
	return one(d.X), one(d.Y), one(d.Z)
}

// MaxKernelArgs is the number of parameters Args holds.
const MaxKernelArgs = 16

// Args holds a kernel's parameters for Launch: cuLaunchKernel reads an array
// of pointers, one per parameter, each to the parameter's value. Every slot
// is eight bytes, little-endian, so a u64, a pointer, a u32 or an f32 each
// fit (the driver reads the parameter's size from the slot's start).
// Parameters larger than eight bytes are not supported. An Args is reused
// across launches; it is not safe for concurrent use.
type Args struct {
	vals [MaxKernelArgs]uint64
	ptrs [MaxKernelArgs]uintptr
	n    int
	pin  runtime.Pinner
}

// Set sets parameter i to v (a u64, or a narrower integer in its low bits).
func (a *Args) Set(i int, v uint64) *Args {
	a.vals[i] = v
	if i >= a.n {
		a.n = i + 1
	}
	return a
}

// SetPtr sets parameter i to a device pointer.
func (a *Args) SetPtr(i int, p uintptr) *Args { return a.Set(i, uint64(p)) }

// SetFloat32 sets parameter i to an f32.
func (a *Args) SetFloat32(i int, v float32) *Args { return a.Set(i, uint64(math.Float32bits(v))) }

// SetFloat64 sets parameter i to an f64.
func (a *Args) SetFloat64(i int, v float64) *Args { return a.Set(i, math.Float64bits(v)) }

// Len returns the number of parameters set.
func (a *Args) Len() int { return a.n }

// Reset clears the parameters.
func (a *Args) Reset() {
	a.vals = [MaxKernelArgs]uint64{}
	a.n = 0
}

// Launch queues the kernel on s with grid × block threads and sharedMem
// bytes of dynamic shared memory. It returns once the launch is queued (the
// kernel runs asynchronously) and allocates nothing.
func (f *Function) Launch(grid, block Dim3, sharedMem int, s *Stream, args *Args) error {
	d, err := lib()
	if err != nil {
		return err
	}
	gx, gy, gz := grid.parts()
	bx, by, bz := block.parts()
	var params uintptr
	if args != nil && args.n > 0 {
		// The driver follows ptrs[i] into vals[i]: both live in args, which
		// stays pinned (and alive) until the launch has copied them.
		args.pin.Pin(args)
		for i := 0; i < args.n; i++ {
			args.ptrs[i] = uintptr(unsafe.Pointer(&args.vals[i]))
		}
		params = uintptr(unsafe.Pointer(&args.ptrs[0]))
	}
	r := call(d.cuLaunchKernel, f.h, gx, gy, gz, bx, by, bz, uintptr(sharedMem), s.handle(), params, 0)
	if args != nil && args.n > 0 {
		args.pin.Unpin()
	}
	runtime.KeepAlive(args)
	if uint32(r) != 0 {
		return newError(r, fmt.Sprintf("cuLaunchKernel %s grid %v block %v", f.Name, grid, block))
	}
	return nil
}
