package sys

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The XPMEM character device's ABI, as published in hpc/xpmem's
// include/xpmem_internal.h and include/xpmem.h (version 2.6.5,
// XPMEM_CURRENT_VERSION 0x00026005). Every command is
// _IO('x', n) with a pointer to its structure as the argument; the
// layouts below are those of x86-64 (xpmem_layout_test.go checks them).

// XPMEMDevice is the device node the xpmem module creates.
const XPMEMDevice = "/dev/xpmem"

// XPMEM versions this ABI speaks: 2.6.x (the structures below are those of
// 2.6; a version word is major<<16 | minor<<12 | patch in hex digits).
const (
	XPMEMVersionMin = 0x00026000
	XPMEMVersionMax = 0x00026fff
)

const (
	xpmemCmdVersion = 'x'<<8 | 0
	xpmemCmdMake    = 'x'<<8 | 1
	xpmemCmdRemove  = 'x'<<8 | 2
	xpmemCmdGet     = 'x'<<8 | 3
	xpmemCmdRelease = 'x'<<8 | 4
	xpmemCmdAttach  = 'x'<<8 | 5
	xpmemCmdDetach  = 'x'<<8 | 6
)

// XPMEM_PERMIT_MODE and the access flags of xpmem_get.
const (
	xpmemPermitMode = 0x1
	xpmemRDWR       = 0x2
	// XPMEMMaxAddrSize shares the whole address space (XPMEM_MAXADDR_SIZE).
	XPMEMMaxAddrSize = ^uint64(0)
)

type xpmemCmdMakeArg struct {
	vaddr       uint64
	size        uint64
	permitType  int32
	_           int32
	permitValue uint64
	segid       int64 // out
}

type xpmemCmdGetArg struct {
	segid       int64
	flags       int32
	permitType  int32
	permitValue uint64
	apid        int64 // out
}

type xpmemCmdAttachArg struct {
	apid   int64
	offset int64
	size   uint64
	vaddr  uint64 // out
	fd     int32
	flags  int32
}

type xpmemCmdIDArg struct{ id int64 } // remove (segid), release (apid), detach (vaddr)

// XPMEM is an open /dev/xpmem. Attachments live as long as the file: keep
// it open while any is in use.
type XPMEM struct{ f *os.File }

// OpenXPMEM opens the device at path (XPMEMDevice when empty). A missing
// node or a refused open matches ErrNotSupported and says which.
func OpenXPMEM(path string) (*XPMEM, error) {
	if path == "" {
		path = XPMEMDevice
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, NotSupported("xpmem", path+" missing (the xpmem module is not loaded)", nil)
	case errors.Is(err, os.ErrPermission):
		return nil, NotSupported("xpmem", "no permission to open "+path, err)
	case errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENODEV):
		return nil, NotSupported("xpmem", path+" has no driver behind it", err)
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &XPMEM{f: f}, nil
}

func (x *XPMEM) ioctl(cmd uintptr, arg unsafe.Pointer) (uintptr, error) {
	for {
		r, _, e := unix.Syscall(unix.SYS_IOCTL, x.f.Fd(), cmd, uintptr(arg))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return r, e
		}
		return r, nil
	}
}

// Version returns the module's XPMEM_CMD_VERSION word.
func (x *XPMEM) Version() (uint32, error) {
	v, err := x.ioctl(xpmemCmdVersion, nil)
	if err != nil {
		return 0, fmt.Errorf("xpmem version: %w", err)
	}
	return uint32(v), nil
}

// CheckXPMEMVersion accepts the versions whose ABI this package speaks; any
// other matches ErrNotSupported.
func CheckXPMEMVersion(v uint32) error {
	if v < XPMEMVersionMin || v > XPMEMVersionMax {
		return NotSupported("xpmem", fmt.Sprintf("module version %#x unsupported (this ABI is 2.6.x, %#x-%#x)", v, XPMEMVersionMin, XPMEMVersionMax), nil)
	}
	return nil
}

// Make exports [vaddr, vaddr+size) (page-aligned; size XPMEMMaxAddrSize
// from 0: the whole address space) to processes with the permission bits
// mode (0600: this user). It returns the segment id.
func (x *XPMEM) Make(vaddr uintptr, size uint64, mode uint32) (int64, error) {
	a := xpmemCmdMakeArg{vaddr: uint64(vaddr), size: size, permitType: xpmemPermitMode, permitValue: uint64(mode)}
	if _, err := x.ioctl(xpmemCmdMake, unsafe.Pointer(&a)); err != nil {
		return 0, fmt.Errorf("xpmem make %#x+%#x: %w", vaddr, size, err)
	}
	if a.segid <= 0 {
		return 0, fmt.Errorf("xpmem make %#x+%#x: segment id %d", vaddr, size, a.segid)
	}
	return a.segid, nil
}

// Remove stops exporting segment segid.
func (x *XPMEM) Remove(segid int64) error {
	return x.idCmd(xpmemCmdRemove, segid, "remove segment")
}

// Get asks for read-write access to segid and returns the access permit id.
// The permit value must be NULL (the module checks the segment's mode
// against this process and returns EINVAL for any other value). EACCES (the
// segment's mode refuses this user) matches ErrNotSupported.
func (x *XPMEM) Get(segid int64) (int64, error) {
	a := xpmemCmdGetArg{segid: segid, flags: xpmemRDWR, permitType: xpmemPermitMode}
	if _, err := x.ioctl(xpmemCmdGet, unsafe.Pointer(&a)); err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return 0, NotSupported("xpmem get", fmt.Sprintf("segment %#x refuses this process", segid), err)
		}
		return 0, fmt.Errorf("xpmem get segment %#x: %w", segid, err)
	}
	return a.apid, nil
}

// Release gives access permit apid back (detaching what is still attached).
func (x *XPMEM) Release(apid int64) error {
	return x.idCmd(xpmemCmdRelease, apid, "release permit")
}

// Attach maps size bytes of apid's segment from offset (page-aligned: the
// exporter's address when the segment starts at 0) into this process and
// returns where.
func (x *XPMEM) Attach(apid int64, offset uintptr, size int) (uintptr, error) {
	a := xpmemCmdAttachArg{apid: apid, offset: int64(offset), size: uint64(size)}
	if _, err := x.ioctl(xpmemCmdAttach, unsafe.Pointer(&a)); err != nil {
		return 0, fmt.Errorf("xpmem attach %#x+%d of permit %#x: %w", offset, size, apid, err)
	}
	return uintptr(a.vaddr), nil
}

// Detach unmaps the attachment at addr.
func (x *XPMEM) Detach(addr uintptr) error {
	return x.idCmd(xpmemCmdDetach, int64(addr), "detach")
}

// idCmd runs command cmd, whose argument is the one id (a segment id, a
// permit id or an address); what names it in the error.
func (x *XPMEM) idCmd(cmd uintptr, id int64, what string) error {
	a := xpmemCmdIDArg{id}
	if _, err := x.ioctl(cmd, unsafe.Pointer(&a)); err != nil {
		return fmt.Errorf("xpmem %s %#x: %w", what, id, err)
	}
	return nil
}

// Close closes the device (the module then drops this process's
// attachments).
func (x *XPMEM) Close() error { return x.f.Close() }

// LoadUint64At atomically loads the aligned word at addr (memory outside
// the Go heap: an attachment, a mapping).
func LoadUint64At(addr uintptr) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&BytesAt(addr, 8)[0])))
}

// StoreUint64At atomically stores v at the aligned word at addr.
func StoreUint64At(addr uintptr, v uint64) {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&BytesAt(addr, 8)[0])), v)
}
