package knem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/gotune/gotune/internal/sys"
)

// device is what the transport needs of KNEM: the real /dev/knem or the
// fake. Its methods may be called from any goroutine.
type device interface {
	Info() (sys.KnemInfo, error)
	// CreateRegion declares [addr, addr+n) for other processes to read
	// (writable false) or write; flags are create flags.
	CreateRegion(addr uintptr, n int, writable bool, flags uint32) (cookie uint64, err error)
	DestroyRegion(cookie uint64) error
	// InlineCopy copies len(local) bytes between local and the region
	// from offset on; pid owns the region (the fake needs it).
	InlineCopy(pid int, local []byte, cookie, offset uint64, write bool, flags uint32) error
	Close() error
}

// realDevice is the module's /dev/knem.
type realDevice struct{ k *sys.Knem }

func (d realDevice) Info() (sys.KnemInfo, error) { return d.k.Info() }
func (d realDevice) CreateRegion(addr uintptr, n int, writable bool, flags uint32) (uint64, error) {
	return d.k.CreateRegion(addr, n, writable, flags)
}
func (d realDevice) DestroyRegion(c uint64) error { return d.k.DestroyRegion(c) }
func (d realDevice) InlineCopy(_ int, local []byte, c, off uint64, write bool, flags uint32) error {
	return d.k.InlineCopy(local, c, off, write, flags)
}
func (d realDevice) Close() error { return d.k.Close() }

// FakeABI is the ABI the fake reports (the real one's).
const FakeABI = sys.KnemABI

// fakeDevice stands in for /dev/knem where the module is absent (tests,
// knem.device=fake). It keeps KNEM's contract where a caller could get it
// wrong: a region is reached only through its cookie, whose record (a file
// in a directory shared by this user's processes) says where it lives and
// whether it may be written; a single-use region is gone after its first
// copy; only its creator destroys it; a copy stops where the region ends.
// The bytes move by process_vm_readv/writev of the creator's live memory,
// so the fake cannot pin: a cached region's stale pages (what invalidation
// prevents) show only with the module.
type fakeDevice struct {
	dir  string
	pid  int
	mu   sync.Mutex
	next uint32
}

// fakeDir is where fake regions' records live.
func fakeDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("gotune-knem-fake-%d", os.Getuid()))
}

func openFake() (*fakeDevice, error) {
	d := &fakeDevice{dir: fakeDir(), pid: os.Getpid()}
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return nil, fmt.Errorf("fake knem: %w", err)
	}
	d.sweep()
	return d, nil
}

// sweep removes records of processes that are gone (killed ranks).
func (d *fakeDevice) sweep() {
	names, _ := filepath.Glob(filepath.Join(d.dir, "*"))
	for _, n := range names {
		var pid, id uint32
		if _, err := fmt.Sscanf(filepath.Base(n), "%08x%08x", &pid, &id); err == nil && sys.ProcessGone(int(pid)) {
			os.Remove(n)
		}
	}
}

func (d *fakeDevice) Info() (sys.KnemInfo, error) { return sys.KnemInfo{ABI: FakeABI}, nil }

func (d *fakeDevice) record(c uint64) string { return filepath.Join(d.dir, fmt.Sprintf("%016x", c)) }

func (d *fakeDevice) CreateRegion(addr uintptr, n int, writable bool, flags uint32) (uint64, error) {
	d.mu.Lock()
	d.next++
	c := uint64(d.pid)<<32 | uint64(d.next)
	d.mu.Unlock()
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(addr))
	binary.LittleEndian.PutUint64(b[8:], uint64(n))
	if writable {
		b[16] = 1
	}
	b[17] = byte(flags & sys.KnemFlagSingleUse)
	tmp := d.record(c) + ".new"
	if err := os.WriteFile(tmp, b[:], 0o600); err != nil {
		return 0, fmt.Errorf("fake knem create region: %w", err)
	}
	if err := os.Rename(tmp, d.record(c)); err != nil {
		return 0, fmt.Errorf("fake knem create region: %w", err)
	}
	return c, nil
}

func (d *fakeDevice) DestroyRegion(c uint64) error {
	if c>>32 != uint64(d.pid) {
		return fmt.Errorf("fake knem destroy region %#x: not this process's: %w", c, syscall.EINVAL)
	}
	if err := os.Remove(d.record(c)); err != nil {
		return fmt.Errorf("fake knem destroy region %#x: %w", c, syscall.EINVAL)
	}
	return nil
}

func (d *fakeDevice) InlineCopy(pid int, local []byte, c, off uint64, write bool, _ uint32) error {
	dir := "from"
	if write {
		dir = "into"
	}
	fail := func(why string, errno syscall.Errno) error {
		return fmt.Errorf("fake knem copy of %d bytes %s region %#x: %s: %w", len(local), dir, c, why, errno)
	}
	if uint64(pid) != c>>32 {
		return fail(fmt.Sprintf("the region is pid %d's, the copy names pid %d", c>>32, pid), syscall.EINVAL)
	}
	path := d.record(c)
	b, err := os.ReadFile(path)
	if err != nil || len(b) != 24 {
		return fail("no such region", syscall.EINVAL)
	}
	addr, n := uintptr(binary.LittleEndian.Uint64(b)), binary.LittleEndian.Uint64(b[8:])
	if write && b[16] == 0 {
		return fail("the region is read-only", syscall.EACCES)
	}
	if b[17] != 0 { // single use: claim it, or lose to another copy
		claimed := fmt.Sprintf("%s.used-%d", path, d.pid)
		if err := os.Rename(path, claimed); err != nil {
			return fail("no such region", syscall.EINVAL)
		}
		os.Remove(claimed)
	}
	if off >= n {
		return nil
	}
	m := min(uint64(len(local)), n-off)
	seg := []sys.RemoteSegment{{Addr: addr + uintptr(off), Len: int(m)}}
	move := sys.CopyFromProcess
	if write {
		move = sys.CopyToProcess
	}
	if _, err := move(pid, [][]byte{local[:m]}, seg); err != nil {
		return fmt.Errorf("fake knem copy of %d bytes %s region %#x: %w", len(local), dir, c, err)
	}
	return nil
}

// Close removes the records of the regions this process still holds, as
// closing /dev/knem destroys them.
func (d *fakeDevice) Close() error {
	names, err := filepath.Glob(filepath.Join(d.dir, fmt.Sprintf("%08x*", d.pid)))
	for _, n := range names {
		if rerr := os.Remove(n); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
}
