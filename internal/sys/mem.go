package sys

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PageSize is the base page size of the running kernel.
var PageSize = os.Getpagesize()

// RoundUp rounds n up to a multiple of align (a power of two).
func RoundUp(n, align int) int { return (n + align - 1) &^ (align - 1) }

// MapAnon returns size bytes of private anonymous memory outside the Go heap,
// zero-filled and, if populate is set, faulted in up front.
func MapAnon(size int, populate bool) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("map anonymous memory: size %d", size)
	}
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if populate {
		flags |= unix.MAP_POPULATE
	}
	b, err := unix.Mmap(-1, 0, RoundUp(size, PageSize), unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return nil, fmt.Errorf("map %d bytes of anonymous memory: %w", size, err)
	}
	return b[:size], nil
}

// MapInaccessible reserves size bytes that the process cannot read or write
// (PROT_NONE): a stand-in, in tests, for device memory, where a stray CPU
// access must crash instead of passing unnoticed. Unmap releases it.
func MapInaccessible(size int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, RoundUp(max(size, 1), PageSize), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("reserve %d inaccessible bytes: %w", size, err)
	}
	return b[:size], nil
}

// MapShared maps size bytes of fd shared and read-write, pre-faulted.
func MapShared(fd uintptr, size int) ([]byte, error) {
	b, err := unix.Mmap(int(fd), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("map %d bytes of shared segment: %w", size, err)
	}
	return b, nil
}

// MapSharedLazy maps size bytes of fd shared and read-write without
// faulting anything in: a page is committed when a process first touches
// it, so parts no process uses cost no memory. Populate pre-faults a part.
func MapSharedLazy(fd uintptr, size int) ([]byte, error) {
	b, err := unix.Mmap(int(fd), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %d bytes of shared segment: %w", size, err)
	}
	return b, nil
}

// Populate faults b's pages in for writing without changing their
// contents (MADV_POPULATE_WRITE; before Linux 5.14, a read of each page,
// which commits a shared page too). b's first byte must be page-aligned.
func Populate(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	err := unix.Madvise(b, unix.MADV_POPULATE_WRITE)
	if err != unix.EINVAL {
		if err != nil {
			return fmt.Errorf("populate %d bytes at %#x: %w", len(b), AddressOf(b), err)
		}
		return nil
	}
	for i := 0; i+4 <= len(b); i += PageSize {
		atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[i]))) // a load the compiler keeps
	}
	return nil
}

// GoString copies the NUL-terminated C string at p (a library's memory,
// such as its static error text); "" for nil.
func GoString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// ResidentPages counts the pages of b that are in memory (mincore): what
// a process has committed of a lazily mapped region. b's first byte must
// be page-aligned.
func ResidentPages(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	vec := make([]byte, (len(b)+PageSize-1)/PageSize)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, AddressOf(b), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, fmt.Errorf("mincore %d bytes at %#x: %w", len(b), AddressOf(b), e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n, nil
}

// Unmap releases a mapping made by MapAnon or MapShared.
func Unmap(b []byte) error {
	if b == nil {
		return nil
	}
	err := unix.Munmap(b[:cap(b)])
	if err == unix.EINVAL {
		// Not a whole mapping of x/sys's Mmap (MapAnonHuge trims its own):
		// unmap the range itself.
		err = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(cap(b)))
	}
	if err != nil {
		return fmt.Errorf("unmap %d bytes: %w", cap(b), err)
	}
	return nil
}

// MemfdCreate returns an anonymous, sized shared-memory file. It lives only as
// long as some process holds a descriptor or a mapping of it, so nothing is
// left behind however its users die.
func MemfdCreate(name string, size int) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		if err == unix.ENOSYS {
			return nil, NotSupported("memfd_create", "kernel older than 3.17", err)
		}
		return nil, fmt.Errorf("memfd_create %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), "memfd:"+name)
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("size memfd %s to %d bytes: %w", name, size, err)
	}
	return f, nil
}

// CreateShmFile creates a POSIX shared-memory file (under /dev/shm) with mode
// 0600; it fails if the name exists.
func CreateShmFile(path string, size int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create shared segment: %w", err)
	}
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("size shared segment %s to %d bytes: %w", path, size, err)
	}
	return f, nil
}

// HugePage is the transparent huge page size on amd64 and arm64 (4 KiB base pages).
const HugePage = 2 << 20

// MapAnonHuge is MapAnon for memory the kernel should back with transparent
// huge pages: the mapping is aligned to HugePage and advised MADV_HUGEPAGE
// before it is faulted in, so THP in "madvise" mode applies to it.
func MapAnonHuge(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("map anonymous memory: size %d", size)
	}
	n := RoundUp(size, HugePage)
	// Raw mmap/munmap: x/sys's Munmap only takes back whole mappings its
	// Mmap made, so it can neither trim this one nor unmap the trimmed
	// result (Unmap falls back to munmap for it).
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(n+HugePage), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("map %d bytes of anonymous memory: %w", size, err)
	}
	raw := unsafe.Slice((*byte)(p), n+HugePage)
	off := RoundUp(int(AddressOf(raw)), HugePage) - int(AddressOf(raw))
	if off > 0 {
		unix.MunmapPtr(p, uintptr(off))
	}
	if tail := raw[off+n:]; len(tail) > 0 {
		unix.MunmapPtr(unsafe.Pointer(&tail[0]), uintptr(len(tail)))
	}
	b := raw[off : off+n : off+n]
	if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil {
		unix.MunmapPtr(unsafe.Pointer(&b[0]), uintptr(n))
		return nil, fmt.Errorf("advise huge pages: %w", err)
	}
	for i := 0; i < n; i += PageSize {
		b[i] = 0
	}
	return b[:size], nil
}

// LockFile takes an exclusive advisory lock (flock) on f without waiting;
// a lock another process holds is ErrLocked. It is released when f closes
// or the process dies.
func LockFile(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == unix.EWOULDBLOCK {
		return ErrLocked
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return nil
}

// ErrLocked says another process holds a file's lock.
var ErrLocked = errors.New("locked by another process")
