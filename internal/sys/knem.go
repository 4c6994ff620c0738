package sys

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// KNEM's /dev/knem interface, as knem_io.h of KNEM_ABI_VERSION 0xd
// declares it (knem 1.1.x, 1.1.1.90mlnx included): the ioctl numbers and
// structure layouts below are that header's; knem_test.go checks them
// against the values worked out from it.

// KnemDevice is where the knem module's device node lives.
const KnemDevice = "/dev/knem"

// KnemABI is the binary interface version gotune speaks.
const KnemABI = 0xd

// Feature and flag bits (knem_io.h).
const (
	KnemFeatureDMA    = 1 << 0 // knem_cmd_info.features: copies may be offloaded to a DMA engine
	KnemFlagDMA       = 1 << 0 // copy flag: offload onto the DMA engine (only with KnemFeatureDMA)
	KnemFlagSingleUse = 1 << 5 // create flag: the region is destroyed after its first use
)

// Copy status (enum knem_status_e).
const (
	knemStatusPending = 0
	knemStatusSuccess = 1
	knemStatusFailed  = 2
)

// KnemInfo is struct knem_cmd_info.
type KnemInfo struct {
	ABI          uint32 // the driver's binary interface version
	Features     uint32 // KnemFeature* bits
	IgnoredFlags uint32 // flags the driver ignores
	ForcedFlags  uint32 // flags the driver forces
}

type knemIovec struct{ Base, Len uint64 } // struct knem_cmd_param_iovec

type knemCreateRegion struct { // struct knem_cmd_create_region
	IovecArray uint64
	IovecNr    uint32
	Flags      uint32
	Protection uint32
	_          uint32
	Cookie     uint64
}

type knemInlineCopyBounded struct { // struct knem_cmd_inline_copy_bounded
	LocalIovecArray  uint64
	LocalIovecNr     uint32
	Write            uint32
	RemoteCookie     uint64
	RemoteOffset     uint64
	Length           uint64
	Flags            uint32
	CurrentStatus    uint32
	AsyncStatusIndex uint32
	_                uint32
}

// ioc is the kernel's _IOC(dir, 'K', nr, size).
func ioc(dir, nr, size uintptr) uintptr { return dir<<30 | size<<16 | 'K'<<8 | nr }

const (
	iocWrite = 1
	iocRead  = 2
)

// The commands gotune uses (knem_io.h's _IOW/_IOR/_IOWR as declared there).
var (
	knemCmdGetInfo           = ioc(iocWrite, 0x10, unsafe.Sizeof(KnemInfo{}))
	knemCmdCreateRegion      = ioc(iocRead|iocWrite, 0x21, unsafe.Sizeof(knemCreateRegion{}))
	knemCmdDestroyRegion     = ioc(iocRead, 0x22, unsafe.Sizeof(uint64(0)))
	knemCmdInlineCopyBounded = ioc(iocRead, 0x35, unsafe.Sizeof(knemInlineCopyBounded{}))
)

// Knem is an open /dev/knem. Its regions live as long as it is open. Its
// methods may be called from any goroutine.
type Knem struct {
	fd   int
	path string
	// The ioctls' arguments live in the Go heap, which does not move: a
	// command holds the address of its iovec as an integer, which a
	// goroutine stack's move would not update. mu guards them.
	mu   sync.Mutex
	args *knemArgs
}

type knemArgs struct {
	iov    knemIovec
	create knemCreateRegion
	copy   knemInlineCopyBounded
	cookie uint64
}

// OpenKnem opens the knem device at path. A missing node, a node without
// its driver and a node this user may not open are ErrNotSupported, each
// saying which.
func OpenKnem(path string) (*Knem, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err == nil {
		return &Knem{fd: fd, path: path, args: new(knemArgs)}, nil
	}
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, NotSupported(path, "missing (the knem module is not loaded: modprobe knem)", err)
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		return nil, NotSupported(path, "permission denied: "+nodeAccess(path), err)
	case errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENODEV):
		return nil, NotSupported(path, "no driver behind the device node (module unloaded?)", err)
	}
	return nil, fmt.Errorf("open %s: %w", path, err)
}

// nodeAccess describes who may open a device node.
func nodeAccess(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return err.Error()
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Sprintf("mode %v", fi.Mode().Perm())
	}
	return fmt.Sprintf("mode %v, owner uid %d, group gid %d; this process is uid %d (a udev rule or group membership grants access)",
		fi.Mode().Perm(), st.Uid, st.Gid, os.Getuid())
}

func (k *Knem) ioctl(cmd uintptr, arg unsafe.Pointer) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(k.fd), cmd, uintptr(arg))
	if e != 0 {
		return e
	}
	return nil
}

// Info asks the driver for its ABI version and features.
func (k *Knem) Info() (KnemInfo, error) {
	var info KnemInfo
	if err := k.ioctl(knemCmdGetInfo, unsafe.Pointer(&info)); err != nil {
		return info, fmt.Errorf("knem get info on %s: %w", k.path, err)
	}
	return info, nil
}

// CreateRegion declares [addr, addr+n) of this process as a region other
// processes may read (writable false) or write, and returns its cookie.
// flags are create flags (KnemFlagSingleUse).
func (k *Knem) CreateRegion(addr uintptr, n int, writable bool, flags uint32) (uint64, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	a := k.args
	a.iov = knemIovec{Base: uint64(addr), Len: uint64(n)}
	a.create = knemCreateRegion{IovecArray: uint64(uintptr(unsafe.Pointer(&a.iov))), IovecNr: 1, Flags: flags, Protection: unix.PROT_READ}
	if writable {
		a.create.Protection = unix.PROT_WRITE
	}
	if err := k.ioctl(knemCmdCreateRegion, unsafe.Pointer(&a.create)); err != nil {
		return 0, fmt.Errorf("knem create region of %d bytes at %#x: %w", n, addr, err)
	}
	return a.create.Cookie, nil
}

// DestroyRegion destroys a region this process created. EINVAL: no such
// region (a single-use one already used, say).
func (k *Knem) DestroyRegion(cookie uint64) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.args.cookie = cookie
	if err := k.ioctl(knemCmdDestroyRegion, unsafe.Pointer(&k.args.cookie)); err != nil {
		return fmt.Errorf("knem destroy region %#x: %w", cookie, err)
	}
	return nil
}

// ErrKnemCopyFailed is a copy the driver accepted and then failed.
var ErrKnemCopyFailed = errors.New("knem copy failed")

// InlineCopy copies len(local) bytes between local and the region cookie
// names, from offset on: from the region into local (write false) or local
// into it. The driver stops silently where the region ends: the caller
// keeps the copy within it. flags are copy flags (KnemFlagDMA); the copy is
// synchronous. local must live outside the Go heap (it is not kept alive).
func (k *Knem) InlineCopy(local []byte, cookie, offset uint64, write bool, flags uint32) error {
	if len(local) == 0 {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	a := k.args
	a.iov = knemIovec{Base: uint64(uintptr(unsafe.Pointer(&local[0]))), Len: uint64(len(local))}
	a.copy = knemInlineCopyBounded{LocalIovecArray: uint64(uintptr(unsafe.Pointer(&a.iov))), LocalIovecNr: 1,
		RemoteCookie: cookie, RemoteOffset: offset, Length: uint64(len(local)), Flags: flags}
	if write {
		a.copy.Write = 1
	}
	c := &a.copy
	dir := "from"
	if write {
		dir = "into"
	}
	if err := k.ioctl(knemCmdInlineCopyBounded, unsafe.Pointer(c)); err != nil {
		return fmt.Errorf("knem copy of %d bytes %s region %#x: %w", len(local), dir, cookie, err)
	}
	switch c.CurrentStatus {
	case knemStatusSuccess:
		return nil
	case knemStatusPending:
		return fmt.Errorf("knem copy of %d bytes %s region %#x: pending, though asked synchronous", len(local), dir, cookie)
	}
	return fmt.Errorf("knem copy of %d bytes %s region %#x: %w (status %d)", len(local), dir, cookie, ErrKnemCopyFailed, c.CurrentStatus)
}

// Close closes the device; the driver destroys the regions it holds.
func (k *Knem) Close() error { return unix.Close(k.fd) }
