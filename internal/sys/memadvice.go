package sys

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Advice is a madvise(2) hint for a range of anonymous memory.
type Advice int

const (
	// AdviseDontNeed hands the pages back to the kernel and keeps the
	// mapping: the next touch of a private anonymous page faults in a
	// zero-filled one. The kernel refuses it (EINVAL) on mlocked memory.
	AdviseDontNeed Advice = unix.MADV_DONTNEED
	// AdviseHugePage asks for transparent huge pages (THP "madvise" mode).
	AdviseHugePage Advice = unix.MADV_HUGEPAGE
	// AdviseNoHugePage forbids transparent huge pages (THP "always" mode).
	AdviseNoHugePage Advice = unix.MADV_NOHUGEPAGE
)

func (a Advice) String() string {
	switch a {
	case AdviseDontNeed:
		return "MADV_DONTNEED"
	case AdviseHugePage:
		return "MADV_HUGEPAGE"
	case AdviseNoHugePage:
		return "MADV_NOHUGEPAGE"
	}
	return fmt.Sprintf("madvise advice %d", int(a))
}

// Madvise applies advice to b, whose first byte must be page-aligned. A
// huge-page advice on a kernel built without transparent huge pages is
// reported as ErrNotSupported.
func Madvise(b []byte, advice Advice) error {
	if len(b) == 0 {
		return nil
	}
	err := unix.Madvise(b, int(advice))
	switch {
	case err == nil:
		return nil
	case err == unix.EINVAL && (advice == AdviseHugePage || advice == AdviseNoHugePage):
		return NotSupported("madvise "+advice.String(), "kernel without transparent huge pages", err)
	}
	return fmt.Errorf("madvise %s %d bytes at %#x: %w", advice, len(b), AddressOf(b), err)
}

// Mlock locks [addr, addr+n) into memory (faulting it in), as pinning for
// registration does. A refusal for lack of privilege or quota (EPERM, or
// ENOMEM past RLIMIT_MEMLOCK without CAP_IPC_LOCK) matches ErrNotSupported.
func Mlock(addr uintptr, n int) error {
	if n <= 0 {
		return nil
	}
	_, _, e := unix.Syscall(unix.SYS_MLOCK, addr, uintptr(n), 0)
	switch e {
	case 0:
		return nil
	case unix.EPERM, unix.ENOMEM:
		return NotSupported("mlock", fmt.Sprintf("%d bytes at %#x: RLIMIT_MEMLOCK exhausted and no CAP_IPC_LOCK", n, addr), e)
	}
	return fmt.Errorf("mlock %d bytes at %#x: %w", n, addr, e)
}

// Munlock unlocks [addr, addr+n). Locks do not nest: one call unlocks pages
// however many Mlock calls covered them.
func Munlock(addr uintptr, n int) error {
	if n <= 0 {
		return nil
	}
	if _, _, e := unix.Syscall(unix.SYS_MUNLOCK, addr, uintptr(n), 0); e != 0 {
		return fmt.Errorf("munlock %d bytes at %#x: %w", n, addr, e)
	}
	return nil
}

// Resident returns how many bytes of the pages spanned by b are resident in
// memory, as mincore(2) reports them.
func Resident(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return ResidentAt(AddressOf(b), len(b))
}

// ResidentAt is Resident for the pages spanning [addr, addr+n). A range
// that is not entirely mapped is an error (ENOMEM).
func ResidentAt(addr uintptr, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	page := uintptr(PageSize)
	start := addr &^ (page - 1)
	end := (addr + uintptr(n) + page - 1) &^ (page - 1)
	const chunk = 1 << 16 // pages per call
	vec := make([]byte, min(int((end-start)/page), chunk))
	resident := 0
	for at := start; at < end; {
		pages := min(int((end-at)/page), chunk)
		_, _, e := unix.Syscall(unix.SYS_MINCORE, at, uintptr(pages)*page, uintptr(unsafe.Pointer(&vec[0])))
		if e != 0 {
			return 0, fmt.Errorf("mincore %d bytes at %#x: %w", uintptr(pages)*page, at, e)
		}
		for _, v := range vec[:pages] {
			if v&1 != 0 {
				resident += int(page)
			}
		}
		at += uintptr(pages) * page
	}
	return resident, nil
}

const capIPCLock = 14 // CAP_IPC_LOCK, linux/capability.h

// WithoutMlockPermission runs fn on a locked OS thread that may not lock
// memory: CAP_IPC_LOCK dropped from the thread's effective set and the
// process's soft RLIMIT_MEMLOCK set to 0; both are restored afterwards.
// The limit is process-wide, so nothing else in the process should lock
// memory meanwhile. It exists to exercise mlock refusals even as root.
func WithoutMlockPermission(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var saved unix.Rlimit
	if err := unix.Prlimit(0, unix.RLIMIT_MEMLOCK, nil, &saved); err != nil {
		return fmt.Errorf("read RLIMIT_MEMLOCK: %w", err)
	}
	zero := unix.Rlimit{Cur: 0, Max: saved.Max}
	if err := unix.Prlimit(0, unix.RLIMIT_MEMLOCK, &zero, nil); err != nil {
		return fmt.Errorf("set RLIMIT_MEMLOCK to 0: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	err := unix.Capget(&hdr, &data[0])
	if err == nil {
		savedCaps := data
		data[0].Effective &^= 1 << capIPCLock
		if err = unix.Capset(&hdr, &data[0]); err == nil {
			err = fn()
			if rerr := unix.Capset(&hdr, &savedCaps[0]); rerr != nil {
				err = errors.Join(err, fmt.Errorf("capset restore: %w", rerr))
			}
		} else {
			err = fmt.Errorf("capset drop CAP_IPC_LOCK: %w", err)
		}
	} else {
		err = fmt.Errorf("capget: %w", err)
	}
	if rerr := unix.Prlimit(0, unix.RLIMIT_MEMLOCK, &saved, nil); rerr != nil {
		err = errors.Join(err, fmt.Errorf("restore RLIMIT_MEMLOCK: %w", rerr))
	}
	return err
}
