package xpmem

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime/debug"
	"sync"

	"github.com/gotune/gotune/internal/sys"
)

// device is what the transport needs of XPMEM: the real /dev/xpmem or the
// fake. Addresses named "local" are where an attachment lives in this
// process; "remote" ones are the exporter's.
type device interface {
	Version() (uint32, error)
	// Make exports this process's whole address space.
	Make() (segid int64, err error)
	Remove(segid int64) error
	Get(segid int64) (apid int64, err error)
	Release(apid int64) error
	// Attach maps [remote, remote+n) of the permit's segment (page-aligned).
	Attach(apid int64, remote uintptr, n int) (local uintptr, err error)
	Detach(local uintptr) error
	// Move copies between buf and the attached bytes at local, which are
	// the exporter pid's bytes at remote: into buf when pull, else out of it.
	Move(pid int, local, remote uintptr, buf []byte, pull bool) error
	// Load64 reads the word at local (remote in pid) atomically.
	Load64(pid int, local, remote uintptr) (uint64, error)
	Close() error
}

const segmentMode = 0o600 // the segment admits this user's processes only

// realDevice is /dev/xpmem.
type realDevice struct{ x *sys.XPMEM }

func openReal(path string) (*realDevice, error) {
	x, err := sys.OpenXPMEM(path)
	if err != nil {
		return nil, err
	}
	v, err := x.Version()
	if err == nil {
		err = sys.CheckXPMEMVersion(v)
	}
	if err != nil {
		x.Close()
		return nil, err
	}
	return &realDevice{x: x}, nil
}

func (d *realDevice) Version() (uint32, error)   { return d.x.Version() }
func (d *realDevice) Make() (int64, error)       { return d.x.Make(0, sys.XPMEMMaxAddrSize, segmentMode) }
func (d *realDevice) Remove(s int64) error       { return d.x.Remove(s) }
func (d *realDevice) Get(s int64) (int64, error) { return d.x.Get(s) }
func (d *realDevice) Release(a int64) error      { return d.x.Release(a) }
func (d *realDevice) Attach(apid int64, remote uintptr, n int) (uintptr, error) {
	return d.x.Attach(apid, remote, n)
}
func (d *realDevice) Detach(local uintptr) error { return d.x.Detach(local) }
func (d *realDevice) Close() error               { return d.x.Close() }

// Move copies through the mapping. A touch of an attachment whose source is
// gone (the exporter exited or unmapped it) faults: that comes back as an
// error, not a crash.
func (d *realDevice) Move(pid int, local, remote uintptr, buf []byte, pull bool) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("xpmem copy of %d bytes at %#x of pid %d faulted (the exporter exited or released that memory): %v", len(buf), remote, pid, r)
		}
	}()
	att := sys.BytesAt(local, len(buf))
	if pull {
		copy(buf, att)
	} else {
		copy(att, buf)
	}
	return nil
}

func (d *realDevice) Load64(pid int, local, remote uintptr) (v uint64, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("xpmem read of pid %d's notice board at %#x faulted: %v", pid, remote, r)
		}
	}()
	return sys.LoadUint64At(local), nil
}

// FakeVersion is the version the fake device reports: the ABI's own.
const FakeVersion = 0x00026005

// fakeDevice stands in for /dev/xpmem where the module is absent (tests):
// segment ids name the exporter's pid, attachments are bookkeeping only,
// and each copy is a process_vm_readv/writev of the exporter's live memory,
// so data moves as through a real attachment while the cache, the notices
// and the protocol run unchanged. It counts its live attachments, so a test
// can tell a leak or a double detach.
type fakeDevice struct {
	mu    sync.Mutex
	next  uintptr
	live  map[uintptr]fakeAttachment
	perms map[int64]int64 // apid -> segid
	made  map[int64]bool
}

type fakeAttachment struct {
	apid   int64
	remote uintptr
	n      int
}

func newFake() *fakeDevice {
	return &fakeDevice{next: 1 << 46, live: map[uintptr]fakeAttachment{}, perms: map[int64]int64{}, made: map[int64]bool{}}
}

func (d *fakeDevice) Version() (uint32, error) { return FakeVersion, nil }

func (d *fakeDevice) Make() (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := int64(os.Getpid())<<16 | int64(len(d.made)+1)
	d.made[s] = true
	return s, nil
}

func (d *fakeDevice) Remove(s int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.made[s] {
		return fmt.Errorf("fake xpmem remove segment %#x: not made here", s)
	}
	delete(d.made, s)
	return nil
}

func (d *fakeDevice) Get(s int64) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := s ^ 0x5a5a<<40 | 1<<60
	d.perms[a] = s
	return a, nil
}

func (d *fakeDevice) Release(a int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.perms[a]; !ok {
		return fmt.Errorf("fake xpmem release permit %#x: unknown", a)
	}
	delete(d.perms, a) // attachments stay counted: Close reports any not detached
	return nil
}

func (d *fakeDevice) Attach(apid int64, remote uintptr, n int) (uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.perms[apid]; !ok {
		return 0, fmt.Errorf("fake xpmem attach: permit %#x unknown", apid)
	}
	if remote%uintptr(sys.PageSize) != 0 || n <= 0 {
		return 0, fmt.Errorf("fake xpmem attach %#x+%d: not page-aligned", remote, n)
	}
	l := d.next
	d.next += uintptr(sys.RoundUp(n, sys.PageSize)) + uintptr(sys.PageSize)
	d.live[l] = fakeAttachment{apid: apid, remote: remote, n: n}
	return l, nil
}

func (d *fakeDevice) Detach(local uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.live[local]; !ok {
		return fmt.Errorf("fake xpmem detach %#x: no attachment there", local)
	}
	delete(d.live, local)
	return nil
}

// check vouches that [local, local+n) lies inside a live attachment whose
// source is [remote, remote+n).
func (d *fakeDevice) check(local, remote uintptr, n int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for l, a := range d.live {
		if l <= local && local+uintptr(n) <= l+uintptr(a.n) {
			if a.remote+(local-l) != remote {
				return fmt.Errorf("fake xpmem: attachment at %#x maps %#x, not %#x", l, a.remote+(local-l), remote)
			}
			return nil
		}
	}
	return fmt.Errorf("fake xpmem: %#x+%d is not inside a live attachment", local, n)
}

func (d *fakeDevice) Move(pid int, local, remote uintptr, buf []byte, pull bool) error {
	if err := d.check(local, remote, len(buf)); err != nil {
		return err
	}
	seg := []sys.RemoteSegment{{Addr: remote, Len: len(buf)}}
	var err error
	if pull {
		_, err = sys.CopyFromProcess(pid, [][]byte{buf}, seg)
	} else {
		_, err = sys.CopyToProcess(pid, [][]byte{buf}, seg)
	}
	return err
}

func (d *fakeDevice) Load64(pid int, local, remote uintptr) (uint64, error) {
	if err := d.check(local, remote, 8); err != nil {
		return 0, err
	}
	var w [8]byte
	if _, err := sys.CopyFromProcess(pid, [][]byte{w[:]}, []sys.RemoteSegment{{Addr: remote, Len: 8}}); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(w[:]), nil
}

func (d *fakeDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.live) > 0 {
		return fmt.Errorf("fake xpmem: closed with %d attachments live", len(d.live))
	}
	return nil
}
