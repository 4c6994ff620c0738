package cuda

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gotune/gotune/internal/sys"
)

// MemKind is where a buffer lives and how it was allocated.
type MemKind int

const (
	// MemHost is pageable host memory: an anonymous mapping off the Go heap.
	MemHost MemKind = iota + 1
	// MemPinned is page-locked host memory from cuMemHostAlloc, portable to
	// every context and mapped into the device address space.
	MemPinned
	// MemDevice is device memory from cuMemAlloc.
	MemDevice
	// MemManaged is managed memory (cuMemAllocManaged, attached globally)
	// without a placement advice.
	MemManaged
	// MemManagedDevice is managed memory whose preferred location is the
	// device (OSU's "MD").
	MemManagedDevice
	// MemManagedHost is managed memory whose preferred location is the host
	// (OSU's "MH").
	MemManagedHost
	// MemPool is device memory from the device's default stream-ordered pool
	// (cuMemAllocAsync / cuMemFreeAsync).
	MemPool
)

var memKindNames = map[MemKind]string{
	MemHost:          "host",
	MemPinned:        "pinned",
	MemDevice:        "device",
	MemManaged:       "managed",
	MemManagedDevice: "managed-device",
	MemManagedHost:   "managed-host",
	MemPool:          "pool",
}

// memKindAliases are the other spellings ParseMemKind accepts (lower case).
var memKindAliases = map[string]MemKind{
	"h": MemHost, "pageable": MemHost,
	"pinned-host": MemPinned, "page-locked": MemPinned,
	"d": MemDevice, "cuda": MemDevice,
	"m":  MemManaged,
	"md": MemManagedDevice, "managed:device": MemManagedDevice,
	"mh": MemManagedHost, "managed:host": MemManagedHost,
	"async": MemPool, "stream-ordered": MemPool,
}

func (k MemKind) String() string {
	if s, ok := memKindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("MemKind(%d)", int(k))
}

// ParseMemKind parses host|pinned|device|managed|managed-device|managed-host|pool,
// case-insensitively, and OSU's letters H, D, M, MH, MD.
func ParseMemKind(s string) (MemKind, error) {
	l := strings.ToLower(strings.TrimSpace(s))
	for k, name := range memKindNames {
		if l == name {
			return k, nil
		}
	}
	if k, ok := memKindAliases[l]; ok {
		return k, nil
	}
	return 0, fmt.Errorf("unknown memory kind %q (want host, pinned, device, managed, managed-device, managed-host or pool; or H, D, MH, MD)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (k MemKind) MarshalText() ([]byte, error) {
	if _, ok := memKindNames[k]; !ok {
		return nil, fmt.Errorf("invalid memory kind %d", int(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *MemKind) UnmarshalText(b []byte) error {
	v, err := ParseMemKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// HostVisible reports whether the host can load and store the memory
// directly (Buffer.Bytes is non-nil).
func (k MemKind) HostVisible() bool {
	switch k {
	case MemHost, MemPinned, MemManaged, MemManagedDevice, MemManagedHost:
		return true
	}
	return false
}

// Managed reports whether k is managed memory.
func (k MemKind) Managed() bool {
	return k == MemManaged || k == MemManagedDevice || k == MemManagedHost
}

// Driver flags and enums for memory (cuda.h).
const (
	memHostAllocPortable  = 0x01 // CU_MEMHOSTALLOC_PORTABLE
	memHostAllocDeviceMap = 0x02 // CU_MEMHOSTALLOC_DEVICEMAP
	memAttachGlobal       = 0x1  // CU_MEM_ATTACH_GLOBAL

	// HostRegisterPortable and HostRegisterDeviceMap are
	// CU_MEMHOSTREGISTER_PORTABLE and CU_MEMHOSTREGISTER_DEVICEMAP.
	HostRegisterPortable  = 0x01
	HostRegisterDeviceMap = 0x02
)

// Buffer is memory of one MemKind. It is not safe for concurrent Free.
type Buffer struct {
	kind   MemKind
	ptr    uintptr // device pointer or host address
	n      int
	host   []byte  // MemHost: the mapping
	stream uintptr // MemPool: the stream that frees it by default
	ipc    bool    // opened from an IPC handle: Free closes it
	dev    *Device
}

// Ptr returns the device pointer (device, managed, pool, IPC) or the host
// address (host, pinned). With unified addressing both are one address space
// and the pointer works in copies of either direction.
func (b *Buffer) Ptr() uintptr { return b.ptr }

// Len returns the buffer's size in bytes.
func (b *Buffer) Len() int { return b.n }

// Kind returns how the buffer was allocated.
func (b *Buffer) Kind() MemKind { return b.kind }

// Device returns the device the buffer was allocated on (nil for MemHost
// allocated with AllocHost).
func (b *Buffer) Device() *Device { return b.dev }

// Bytes returns the memory as a slice for host-visible kinds, nil otherwise.
// Managed memory is host-visible; the host must not touch it while a kernel
// may (synchronize first).
func (b *Buffer) Bytes() []byte {
	if b.ptr == 0 || !b.kind.HostVisible() || b.ipc {
		return nil
	}
	if b.host != nil {
		return b.host
	}
	return sys.BytesAt(b.ptr, b.n)
}

// AllocHost maps n bytes of pageable host memory off the Go heap (no driver
// needed).
func AllocHost(n int) (*Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("allocate %d bytes of host memory: size must be positive", n)
	}
	m, err := sys.MapAnon(n, true)
	if err != nil {
		return nil, err
	}
	return &Buffer{kind: MemHost, ptr: sys.AddressOf(m), n: n, host: m}, nil
}

// Alloc allocates n bytes of kind in the bound context (x's). MemPool
// allocates on the legacy default stream (see AllocAsync).
func (x *Device) Alloc(kind MemKind, n int) (*Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("allocate %d bytes of %s memory: size must be positive", n, kind)
	}
	if kind == MemHost {
		b, err := AllocHost(n)
		if b != nil {
			b.dev = x
		}
		return b, err
	}
	if kind == MemPool {
		return x.AllocAsync(n, nil)
	}
	d, err := lib()
	if err != nil {
		return nil, err
	}
	b := &Buffer{kind: kind, n: n, dev: x}
	switch kind {
	case MemPinned:
		var p uintptr
		if r, _, _ := purego.SyscallN(d.cuMemHostAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n), memHostAllocPortable|memHostAllocDeviceMap); uint32(r) != 0 {
			return nil, newError(r, "cuMemHostAlloc "+Size(n))
		}
		b.ptr = p
	case MemDevice:
		var p uintptr
		if r, _, _ := purego.SyscallN(d.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n)); uint32(r) != 0 {
			return nil, newError(r, "cuMemAlloc "+Size(n))
		}
		b.ptr = p
	case MemManaged, MemManagedDevice, MemManagedHost:
		if !x.ManagedMemory {
			return nil, notSupported("managed memory", x.Name+" does not support it", nil)
		}
		var p uintptr
		if r, _, _ := purego.SyscallN(d.cuMemAllocManaged, uintptr(unsafe.Pointer(&p)), uintptr(n), memAttachGlobal); uint32(r) != 0 {
			return nil, newError(r, "cuMemAllocManaged "+Size(n))
		}
		b.ptr = p
		var loc Location
		switch kind {
		case MemManagedDevice:
			loc = Location{Type: LocationDevice, ID: x.Ordinal}
		case MemManagedHost:
			loc = Location{Type: LocationHost}
		}
		if loc.Type != 0 {
			if err := MemAdvise(b.ptr, n, AdviseSetPreferredLocation, loc); err != nil {
				b.Free()
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("allocate %s: unknown memory kind", kind)
	}
	return b, nil
}

// AllocAsync allocates n bytes from the device's default memory pool in
// stream order on s (nil: the legacy default stream). The memory may be used
// by work queued on s after this call; Free returns it on s.
func (x *Device) AllocAsync(n int, s *Stream) (*Buffer, error) {
	d, err := lib()
	if err != nil {
		return nil, err
	}
	if err := needSymbol(d.cuMemAllocAsync, "cuMemAllocAsync"); err != nil {
		return nil, err
	}
	if !x.MemoryPools {
		return nil, notSupported("stream-ordered memory pools", x.Name+" does not support them", nil)
	}
	var p uintptr
	if r, _, _ := purego.SyscallN(d.cuMemAllocAsync, uintptr(unsafe.Pointer(&p)), uintptr(n), s.handle()); uint32(r) != 0 {
		return nil, newError(r, "cuMemAllocAsync "+Size(n))
	}
	return &Buffer{kind: MemPool, ptr: p, n: n, stream: s.handle(), dev: x}, nil
}

// Free releases the buffer; a second Free does nothing. A MemPool buffer is
// freed in stream order on the stream it was allocated on.
func (b *Buffer) Free() error {
	if b == nil || b.ptr == 0 {
		return nil
	}
	if b.kind == MemPool {
		return b.FreeAsync(&Stream{h: b.stream})
	}
	p := b.ptr
	b.ptr = 0
	if b.kind == MemHost {
		m := b.host
		b.host = nil
		return sys.Unmap(m)
	}
	d, err := lib()
	if err != nil {
		return err
	}
	switch {
	case b.ipc:
		return result(call(d.cuIpcCloseMemHandle, p), "cuIpcCloseMemHandle")
	case b.kind == MemPinned:
		return result(call(d.cuMemFreeHost, p), "cuMemFreeHost")
	default:
		return result(call(d.cuMemFree, p), "cuMemFree "+Size(b.n))
	}
}

// FreeAsync returns a MemPool buffer to its pool in stream order on s.
func (b *Buffer) FreeAsync(s *Stream) error {
	if b == nil || b.ptr == 0 {
		return nil
	}
	if b.kind != MemPool {
		return fmt.Errorf("free %s buffer in stream order: only pool memory can be", b.kind)
	}
	d, err := lib()
	if err != nil {
		return err
	}
	p := b.ptr
	b.ptr = 0
	return result(call(d.cuMemFreeAsync, p, s.handle()), "cuMemFreeAsync "+Size(b.n))
}

// MemAdvice is a CUmem_advise value.
type MemAdvice int

// CUmem_advise (cuda.h).
const (
	AdviseSetReadMostly          MemAdvice = 1
	AdviseUnsetReadMostly        MemAdvice = 2
	AdviseSetPreferredLocation   MemAdvice = 3
	AdviseUnsetPreferredLocation MemAdvice = 4
	AdviseSetAccessedBy          MemAdvice = 5
	AdviseUnsetAccessedBy        MemAdvice = 6
)

// LocationType is a CUmemLocationType.
type LocationType int

// CUmemLocationType (cuda.h).
const (
	LocationDevice          LocationType = 1 // ID is a device ordinal
	LocationHost            LocationType = 2 // ID is ignored
	LocationHostNUMA        LocationType = 3 // ID is a NUMA node
	LocationHostNUMACurrent LocationType = 4 // the calling thread's NUMA node
)

// Location is a CUmemLocation: {int type; int id}.
type Location struct {
	Type LocationType
	ID   int
}

// word returns the location as the one INTEGER eightbyte the System V ABI
// passes it in: type in the low half, id in the high half.
func (l Location) word() uintptr {
	return uintptr(uint32(int32(l.Type))) | uintptr(uint32(int32(l.ID)))<<32
}

// cuDeviceCPU is CU_DEVICE_CPU, the host for the CUdevice form of cuMemAdvise.
const cuDeviceCPU = -1

// MemAdvise advises the driver about managed memory [ptr, ptr+n)
// (cuMemAdvise_v2, or the CUdevice form on drivers older than 12.2).
func MemAdvise(ptr uintptr, n int, advice MemAdvice, loc Location) error {
	d, err := lib()
	if err != nil {
		return err
	}
	var r uintptr
	if d.cuMemAdviseV2 != 0 {
		r = callMemAdvise(d.cuMemAdviseV2, ptr, n, advice, loc)
	} else {
		var dev int32
		switch loc.Type {
		case LocationDevice:
			dev = int32(loc.ID)
		case LocationHost:
			dev = cuDeviceCPU
		default:
			return notSupported(fmt.Sprintf("cuMemAdvise location type %d", loc.Type), "driver older than CUDA 12.2", nil)
		}
		r = call(d.cuMemAdviseV1, ptr, uintptr(n), uintptr(advice), uintptr(uint32(dev)))
	}
	if uint32(r) != 0 {
		return newError(r, fmt.Sprintf("cuMemAdvise %s advice %d location %+v", Size(n), advice, loc))
	}
	return nil
}

// callMemAdvise calls fn, of cuMemAdvise_v2's shape
// CUresult (CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location).
// System V x86-64: CUmemLocation {int type; int id} is one eightbyte of
// class INTEGER, passed by value in the fourth integer register (RCX).
func callMemAdvise(fn, ptr uintptr, n int, advice MemAdvice, loc Location) uintptr {
	return call(fn, ptr, uintptr(n), uintptr(advice), loc.word())
}

// Memory pool attributes (CUmemPool_attribute, cuda.h).
const (
	poolAttrReleaseThreshold   = 4
	poolAttrReservedMemCurrent = 5
	poolAttrReservedMemHigh    = 6
	poolAttrUsedMemCurrent     = 7
	poolAttrUsedMemHigh        = 8
)

// PoolUsage is what the default memory pool holds.
type PoolUsage struct {
	Reserved, ReservedHigh uint64 // bytes the pool holds from the driver
	Used, UsedHigh         uint64 // bytes handed out
}

// defaultPool loads the driver and returns it with the device's default
// memory pool.
func (x *Device) defaultPool() (*driver, uintptr, error) {
	d, err := lib()
	if err != nil {
		return nil, 0, err
	}
	if err := needSymbol(d.cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool"); err != nil {
		return nil, 0, err
	}
	if !x.MemoryPools {
		return nil, 0, notSupported("stream-ordered memory pools", x.Name+" does not support them", nil)
	}
	var pool uintptr
	if r, _, _ := purego.SyscallN(d.cuDeviceGetDefaultMemPool, uintptr(unsafe.Pointer(&pool)), uintptr(x.dev)); uint32(r) != 0 {
		return nil, 0, newError(r, "cuDeviceGetDefaultMemPool")
	}
	return d, pool, nil
}

// SetPoolReleaseThreshold sets how many bytes the default pool keeps
// reserved at a synchronization instead of returning them to the driver
// (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD; the default, 0, releases everything).
func (x *Device) SetPoolReleaseThreshold(bytes uint64) error {
	d, pool, err := x.defaultPool()
	if err != nil {
		return err
	}
	v := bytes
	if r, _, _ := purego.SyscallN(d.cuMemPoolSetAttribute, pool, poolAttrReleaseThreshold, uintptr(unsafe.Pointer(&v))); uint32(r) != 0 {
		return newError(r, "cuMemPoolSetAttribute release threshold "+Size(int(bytes)))
	}
	return nil
}

// PoolUsage reads the default pool's reserved and used bytes.
func (x *Device) PoolUsage() (PoolUsage, error) {
	var u PoolUsage
	d, pool, err := x.defaultPool()
	if err != nil {
		return u, err
	}
	for _, a := range []struct {
		attr uintptr
		dst  *uint64
	}{
		{poolAttrReservedMemCurrent, &u.Reserved},
		{poolAttrReservedMemHigh, &u.ReservedHigh},
		{poolAttrUsedMemCurrent, &u.Used},
		{poolAttrUsedMemHigh, &u.UsedHigh},
	} {
		var v uint64
		if r, _, _ := purego.SyscallN(d.cuMemPoolGetAttribute, pool, a.attr, uintptr(unsafe.Pointer(&v))); uint32(r) != 0 {
			return u, newError(r, fmt.Sprintf("cuMemPoolGetAttribute %d", a.attr))
		}
		*a.dst = v
	}
	return u, nil
}

// TrimPool releases the default pool's unused memory down to keep bytes.
func (x *Device) TrimPool(keep uint64) error {
	d, pool, err := x.defaultPool()
	if err != nil {
		return err
	}
	return result(call(d.cuMemPoolTrimTo, pool, uintptr(keep)), "cuMemPoolTrimTo "+Size(int(keep)))
}

// RegisterHost page-locks host memory that the caller owns (off the Go heap:
// an mmap) and maps it for the device (cuMemHostRegister, flags
// HostRegisterPortable|HostRegisterDeviceMap when 0).
func RegisterHost(b []byte, flags int) error {
	d, err := lib()
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return fmt.Errorf("register host memory: empty range")
	}
	if flags == 0 {
		flags = HostRegisterPortable | HostRegisterDeviceMap
	}
	return result(call(d.cuMemHostRegister, sys.AddressOf(b), uintptr(len(b)), uintptr(flags)), "cuMemHostRegister "+Size(len(b)))
}

// UnregisterHost undoes RegisterHost.
func UnregisterHost(b []byte) error {
	d, err := lib()
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return nil
	}
	return result(call(d.cuMemHostUnregister, sys.AddressOf(b)), "cuMemHostUnregister")
}

// MemoryType is a CUmemorytype, or MemoryUnregistered for host memory the
// driver does not know.
type MemoryType int

// CUmemorytype (cuda.h), and 0 for memory unknown to CUDA.
const (
	MemoryUnregistered MemoryType = 0
	MemoryHost         MemoryType = 1
	MemoryDevice       MemoryType = 2
	MemoryArray        MemoryType = 3
	MemoryUnified      MemoryType = 4
)

func (t MemoryType) String() string {
	switch t {
	case MemoryUnregistered:
		return "unregistered"
	case MemoryHost:
		return "host"
	case MemoryDevice:
		return "device"
	case MemoryArray:
		return "array"
	case MemoryUnified:
		return "unified"
	}
	return fmt.Sprintf("MemoryType(%d)", int(t))
}

// CUpointer_attribute values (cuda.h).
const (
	pointerAttrMemoryType    = 2
	pointerAttrIsManaged     = 8
	pointerAttrDeviceOrdinal = 9
)

// PointerInfo is what the driver knows of an address.
type PointerInfo struct {
	Type    MemoryType
	Managed bool
	Ordinal int // the device the memory belongs to; -1 when none
}

// PointerAttributes asks the driver what p is (cuPointerGetAttribute).
// Host memory it does not know reads as MemoryUnregistered, not an error.
func PointerAttributes(p uintptr) (PointerInfo, error) {
	info := PointerInfo{Ordinal: -1}
	d, err := lib()
	if err != nil {
		return info, err
	}
	var t uint32
	r, _, _ := purego.SyscallN(d.cuPointerGetAttribute, uintptr(unsafe.Pointer(&t)), pointerAttrMemoryType, p)
	switch uint32(r) {
	case 0:
		info.Type = MemoryType(t)
	case CodeInvalidValue:
		return info, nil // not memory CUDA knows
	default:
		return info, newError(r, fmt.Sprintf("cuPointerGetAttribute memory type %#x", p))
	}
	var managed uint32
	if r, _, _ := purego.SyscallN(d.cuPointerGetAttribute, uintptr(unsafe.Pointer(&managed)), pointerAttrIsManaged, p); uint32(r) == 0 {
		info.Managed = managed != 0
	}
	var ord int32
	if r, _, _ := purego.SyscallN(d.cuPointerGetAttribute, uintptr(unsafe.Pointer(&ord)), pointerAttrDeviceOrdinal, p); uint32(r) == 0 {
		info.Ordinal = int(ord)
	}
	return info, nil
}
