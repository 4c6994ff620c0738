package sys

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PinThread binds the calling OS thread to one CPU. The caller must have
// locked its goroutine to the thread (runtime.LockOSThread) first.
func PinThread(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin thread to cpu %d: %w", cpu, err)
	}
	return nil
}

// AllowedCPUs lists the CPUs this process may run on.
func AllowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("read cpu affinity: %w", err)
	}
	var cpus []int
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

// KillGroup sends sig to every process in process group pgid.
func KillGroup(pgid int, sig unix.Signal) error {
	if err := unix.Kill(-pgid, sig); err != nil && err != unix.ESRCH {
		return fmt.Errorf("signal process group %d: %w", pgid, err)
	}
	return nil
}

// AllowAnyTracer lets sibling processes attach to this one for cross-memory
// copies under Yama's ptrace_scope=1, as MPI libraries do. Without Yama it is
// a no-op.
func AllowAnyTracer() error {
	err := unix.Prctl(unix.PR_SET_PTRACER, unix.PR_SET_PTRACER_ANY, 0, 0, 0)
	if err != nil && err != unix.EINVAL {
		return fmt.Errorf("prctl PR_SET_PTRACER: %w", err)
	}
	return nil
}

// SetDumpable sets the process's dumpable attribute; a non-dumpable process
// can only be read by tracers holding CAP_SYS_PTRACE.
func SetDumpable(on bool) error {
	v := uintptr(0)
	if on {
		v = 1
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, v, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_DUMPABLE: %w", err)
	}
	return nil
}

const capSysPtrace = 19 // CAP_SYS_PTRACE, linux/capability.h

// WithoutPtraceCapability runs fn on a locked OS thread whose effective
// capability set lacks CAP_SYS_PTRACE, then restores it. Linux capabilities
// are per thread, so the rest of the process is unaffected. It exists to
// exercise permission failures of cross-memory attach even as root.
func WithoutPtraceCapability(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	saved := data
	data[0].Effective &^= 1 << capSysPtrace
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset drop CAP_SYS_PTRACE: %w", err)
	}
	ferr := fn()
	if err := unix.Capset(&hdr, &saved[0]); err != nil {
		return errors.Join(ferr, fmt.Errorf("capset restore: %w", err))
	}
	return ferr
}

// RemoteSegment is a range of another process's address space.
type RemoteSegment struct {
	Addr uintptr
	Len  int
}

// maxIovecs bounds the iovec arrays handed to one process_vm_* call (UIO_MAXIOV).
const maxIovecs = 1024

// CopyFromProcess reads remote segments of process pid into local (the
// concatenation of local buffers and of remote segments must match in length)
// with process_vm_readv, resuming after partial transfers.
func CopyFromProcess(pid int, local [][]byte, remote []RemoteSegment) (int, error) {
	return crossMemory(pid, local, remote, false)
}

// CopyToProcess writes local buffers into remote segments of process pid with
// process_vm_writev, resuming after partial transfers.
func CopyToProcess(pid int, local [][]byte, remote []RemoteSegment) (int, error) {
	return crossMemory(pid, local, remote, true)
}

func crossMemory(pid int, local [][]byte, remote []RemoteSegment, write bool) (int, error) {
	name := "process_vm_readv"
	if write {
		name = "process_vm_writev"
	}
	total := 0
	for _, b := range local {
		total += len(b)
	}
	rtotal := 0
	for _, r := range remote {
		rtotal += r.Len
	}
	if total != rtotal {
		return 0, fmt.Errorf("%s: local %d bytes, remote %d bytes", name, total, rtotal)
	}
	liov := make([]unix.Iovec, 0, min(len(local), maxIovecs))
	riov := make([]unix.RemoteIovec, 0, min(len(remote), maxIovecs))
	done := 0
	for done < total {
		// Build iovec arrays starting at byte offset done on both sides.
		liov, riov = liov[:0], riov[:0]
		off := done
		for _, b := range local {
			if off >= len(b) {
				off -= len(b)
				continue
			}
			if len(liov) == maxIovecs {
				break
			}
			seg := b[off:]
			off = 0
			v := unix.Iovec{Base: &seg[0]}
			v.SetLen(len(seg))
			liov = append(liov, v)
		}
		off = done
		for _, r := range remote {
			if off >= r.Len {
				off -= r.Len
				continue
			}
			if len(riov) == maxIovecs {
				break
			}
			riov = append(riov, unix.RemoteIovec{Base: r.Addr + uintptr(off), Len: r.Len - off})
			off = 0
		}
		var n int
		var err error
		if write {
			n, err = unix.ProcessVMWritev(pid, liov, riov, 0)
		} else {
			n, err = unix.ProcessVMReadv(pid, liov, riov, 0)
		}
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EPERM:
			return done, NotSupported(name, fmt.Sprintf("no permission to access pid %d (ptrace restrictions: kernel.yama.ptrace_scope, a non-dumpable peer, or missing CAP_SYS_PTRACE)", pid), err)
		case err == unix.ENOSYS:
			return done, NotSupported(name, "kernel built without CONFIG_CROSS_MEMORY_ATTACH", err)
		case err != nil:
			return done, fmt.Errorf("%s pid %d: %w", name, pid, err)
		case n == 0:
			return done, fmt.Errorf("%s pid %d: no progress after %d of %d bytes", name, pid, done, total)
		}
		done += n
	}
	return done, nil
}

// AddressOf returns the address of the first byte of b (which must not be
// empty and must live outside the Go heap, or be pinned, to stay valid).
func AddressOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// BytesAt is the n bytes at addr as a slice: memory the Go runtime does not
// manage (a mapping, a peer's buffer in a single-process test, or a device
// address that only a GPU copy may dereference). The caller vouches that
// the range stays valid while the slice is used.
func BytesAt(addr uintptr, n int) []byte {
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}

// Yield gives up the CPU to another runnable thread.
func Yield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// Gettid returns the calling thread's kernel thread id.
func Gettid() int { return unix.Gettid() }

// ProcessGone reports whether no process has this pid (kill(pid, 0) fails
// with ESRCH); a process of another user still counts as present.
func ProcessGone(pid int) bool { return unix.Kill(pid, 0) == unix.ESRCH }
