package nccl

import (
	"context"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gotune/gotune/internal/sys"
)

// LibraryEnv names a libnccl.so.2 to load instead of searching.
const LibraryEnv = "GOTUNE_LIBNCCL"

// MinVersion is the oldest NCCL the binding takes: 2.23, the first with
// ncclCommInitRankScalable (and NCCL_CONF_FILE).
const MinVersion = 22300

// Lib is a loaded NCCL.
type Lib struct {
	Path    string
	Version Version

	getErrorString, getUniqueID, commInitRankScalable, commDestroy uintptr
	commAbort, commGetAsyncError, groupStart, groupEnd             uintptr
	send, recv, allReduce, allGather, reduceScatter, broadcast     uintptr
}

// Version is NCCL's version as ncclGetVersion's code gives it.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// code is NCCL_VERSION_CODE's form since 2.9: major*10000 + minor*100 + patch.
func (v Version) code() int { return v.Major*10000 + v.Minor*100 + v.Patch }

func versionOf(code int) Version {
	return Version{Major: code / 10000, Minor: code / 100 % 100, Patch: code % 100}
}

// Error is an NCCL call's failure: its result code and NCCL's words for it.
type Error struct {
	Op   string
	Code int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: NCCL error %d (%s)", e.Op, e.Code, e.Msg) }

var (
	loadOnce sync.Once
	loaded   *Lib
	loadErr  error
)

// Load finds and loads NCCL once; later calls return the first result.
// Its error matches sys.ErrNotSupported when no library loads or the one
// found is too old.
func Load() (*Lib, error) {
	loadOnce.Do(func() { loaded, loadErr = open(Candidates()) })
	return loaded, loadErr
}

// Candidates are the paths Load tries, in order: GOTUNE_LIBNCCL alone
// when set; else the loader's own search for libnccl.so.2, then the
// libraries of NCCL's Python wheels in the site-packages directories
// python3 reports, asked only once the loader's search has failed.
func Candidates() iter.Seq[string] {
	return func(yield func(string) bool) {
		if p := os.Getenv(LibraryEnv); p != "" {
			yield(p)
			return
		}
		if !yield("libnccl.so.2") {
			return
		}
		for _, dir := range sitePackages() {
			for _, sub := range []string{"nvidia/nccl/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"} {
				if p := filepath.Join(dir, sub, "libnccl.so.2"); fileExists(p) && !yield(p) {
					return
				}
			}
		}
	}
}

// sitePackages asks python3 where its packages live (system, user and,
// inside a virtual environment, its own); none when it cannot say.
func sitePackages() []string {
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c",
		"import site\nfor d in site.getsitepackages() + [site.getusersitepackages()]: print(d)").Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// open loads the first of paths that loads and checks what it is.
func open(paths iter.Seq[string]) (*Lib, error) {
	var tried []string
	for p := range paths {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			why := err.Error()
			if why == "" { // dlerror said nothing (another thread took its message)
				why = p + ": does not load"
			}
			tried = append(tried, why)
			continue
		}
		return bind(h, p)
	}
	return nil, sys.NotSupported("nccl", "no libnccl.so.2 loads (set "+LibraryEnv+" to its path): "+strings.Join(tried, "; "), nil)
}

// bind looks up the entry points and the version of the library at h.
func bind(h uintptr, path string) (*Lib, error) {
	l := &Lib{Path: path}
	var getVersion uintptr
	for _, s := range []struct {
		dst  *uintptr
		name string
	}{
		{&getVersion, "ncclGetVersion"}, {&l.getErrorString, "ncclGetErrorString"}, {&l.getUniqueID, "ncclGetUniqueId"},
		{&l.commInitRankScalable, "ncclCommInitRankScalable"}, {&l.commDestroy, "ncclCommDestroy"},
		{&l.commAbort, "ncclCommAbort"}, {&l.commGetAsyncError, "ncclCommGetAsyncError"},
		{&l.groupStart, "ncclGroupStart"}, {&l.groupEnd, "ncclGroupEnd"}, {&l.send, "ncclSend"}, {&l.recv, "ncclRecv"},
		{&l.allReduce, "ncclAllReduce"}, {&l.allGather, "ncclAllGather"}, {&l.reduceScatter, "ncclReduceScatter"},
		{&l.broadcast, "ncclBroadcast"},
	} {
		p, err := purego.Dlsym(h, s.name)
		if err != nil || p == 0 {
			return nil, sys.NotSupported("nccl", path+" lacks "+s.name+" (NCCL older than 2.23?)", err)
		}
		*s.dst = p
	}
	var code int32
	if r, _, _ := purego.SyscallN(getVersion, uintptr(unsafe.Pointer(&code))); int32(r) != 0 {
		return nil, sys.NotSupported("nccl", path+": ncclGetVersion failed", l.fail("ncclGetVersion", r))
	}
	l.Version = versionOf(int(code))
	if l.Version.code() < MinVersion {
		return nil, sys.NotSupported("nccl", fmt.Sprintf("%s is NCCL %s; gotune needs %s or later", path, l.Version, versionOf(MinVersion)), nil)
	}
	return l, nil
}

// fail is the Error of an NCCL call that returned r.
func (l *Lib) fail(op string, r uintptr) error {
	code := int(int32(r))
	msg := ""
	if l.getErrorString != 0 {
		p, _, _ := purego.SyscallN(l.getErrorString, uintptr(code))
		msg = sys.GoString((*byte)(unsafe.Add(nil, p)))
	}
	return &Error{Op: op, Code: code, Msg: msg}
}

// UniqueID is ncclUniqueId: 128 opaque bytes rank 0 makes and every rank
// of a communicator gets over gotune's own bootstrap.
type UniqueID [128]byte

// NewUniqueID asks NCCL for a communicator's id (ncclGetUniqueId).
func (l *Lib) NewUniqueID() (UniqueID, error) {
	var id UniqueID
	if r, _, _ := purego.SyscallN(l.getUniqueID, uintptr(unsafe.Pointer(&id))); int32(r) != 0 {
		return id, l.fail("ncclGetUniqueId", r)
	}
	return id, nil
}

// Comm is an NCCL communicator (ncclComm_t).
type Comm uintptr

// InitRank joins rank of a communicator of nranks ranks made from id,
// with NCCL's default configuration (ncclCommInitRankScalable, one id).
// It blocks until every rank has joined.
func (l *Lib) InitRank(nranks, rank int, id UniqueID) (Comm, error) {
	var c uintptr
	r, _, _ := purego.SyscallN(l.commInitRankScalable, uintptr(unsafe.Pointer(&c)), uintptr(nranks), uintptr(rank), 1,
		uintptr(unsafe.Pointer(&id)), 0)
	if int32(r) != 0 {
		return 0, l.fail(fmt.Sprintf("ncclCommInitRankScalable(rank %d of %d)", rank, nranks), r)
	}
	return Comm(c), nil
}

// Destroy frees a communicator (ncclCommDestroy).
func (l *Lib) Destroy(c Comm) error {
	if r, _, _ := purego.SyscallN(l.commDestroy, uintptr(c)); int32(r) != 0 {
		return l.fail("ncclCommDestroy", r)
	}
	return nil
}

// Abort frees a communicator without waiting for its operations
// (ncclCommAbort): what a rank does once a peer has failed.
func (l *Lib) Abort(c Comm) error {
	if r, _, _ := purego.SyscallN(l.commAbort, uintptr(c)); int32(r) != 0 {
		return l.fail("ncclCommAbort", r)
	}
	return nil
}

// AsyncError is the error NCCL has recorded on c while its operations ran
// (ncclCommGetAsyncError): nil while none, a remote peer's failure say
// once there is one.
func (l *Lib) AsyncError(c Comm) error {
	var code int32
	if r, _, _ := purego.SyscallN(l.commGetAsyncError, uintptr(c), uintptr(unsafe.Pointer(&code))); int32(r) != 0 {
		return l.fail("ncclCommGetAsyncError", r)
	}
	if code != 0 && code != inProgress {
		return l.fail("NCCL's communicator", uintptr(code))
	}
	return nil
}

// inProgress is ncclInProgress, which a non-blocking communicator's
// pending operations report: not an error.
const inProgress = 7

// DataType is ncclDataType_t.
type DataType int

// The data types gotune sends: bytes for point-to-point and copies,
// 32-bit floats for reductions (nccl-tests' default).
const (
	Int8    DataType = 0
	Float32 DataType = 7
)

// Size is the element's size in bytes.
func (t DataType) Size() int {
	if t == Float32 {
		return 4
	}
	return 1
}

// RedOp is ncclRedOp_t.
type RedOp int

// Sum is ncclSum.
const Sum RedOp = 0

// GroupStart opens a group (ncclGroupStart): the operations issued until
// GroupEnd are launched together, so sends and receives between the
// same ranks cannot wait on each other.
func (l *Lib) GroupStart() error {
	if r, _, _ := purego.SyscallN(l.groupStart); int32(r) != 0 {
		return l.fail("ncclGroupStart", r)
	}
	return nil
}

// GroupEnd launches the group's operations on their streams (ncclGroupEnd).
func (l *Lib) GroupEnd() error {
	if r, _, _ := purego.SyscallN(l.groupEnd); int32(r) != 0 {
		return l.fail("ncclGroupEnd", r)
	}
	return nil
}

// Send queues count elements at buf to peer on stream (ncclSend); buf is
// an address a GPU can read.
func (l *Lib) Send(buf uintptr, count int, t DataType, peer int, c Comm, stream uintptr) error {
	if r, _, _ := purego.SyscallN(l.send, buf, uintptr(count), uintptr(t), uintptr(peer), uintptr(c), stream); int32(r) != 0 {
		return l.fail(fmt.Sprintf("ncclSend(%d elements to rank %d)", count, peer), r)
	}
	return nil
}

// Recv queues the receipt of count elements from peer into buf on stream
// (ncclRecv).
func (l *Lib) Recv(buf uintptr, count int, t DataType, peer int, c Comm, stream uintptr) error {
	if r, _, _ := purego.SyscallN(l.recv, buf, uintptr(count), uintptr(t), uintptr(peer), uintptr(c), stream); int32(r) != 0 {
		return l.fail(fmt.Sprintf("ncclRecv(%d elements from rank %d)", count, peer), r)
	}
	return nil
}

// AllReduce queues ncclAllReduce of count elements.
func (l *Lib) AllReduce(send, recv uintptr, count int, t DataType, op RedOp, c Comm, stream uintptr) error {
	if r, _, _ := purego.SyscallN(l.allReduce, send, recv, uintptr(count), uintptr(t), uintptr(op), uintptr(c), stream); int32(r) != 0 {
		return l.fail(fmt.Sprintf("ncclAllReduce(%d elements)", count), r)
	}
	return nil
}

// AllGather queues ncclAllGather: every rank's sendCount elements into
// every rank's recv, in rank order.
func (l *Lib) AllGather(send, recv uintptr, sendCount int, t DataType, c Comm, stream uintptr) error {
	if r, _, _ := purego.SyscallN(l.allGather, send, recv, uintptr(sendCount), uintptr(t), uintptr(c), stream); int32(r) != 0 {
		return l.fail(fmt.Sprintf("ncclAllGather(%d elements a rank)", sendCount), r)
	}
	return nil
}

// ReduceScatter queues ncclReduceScatter: recvCount reduced elements
// land on each rank.
func (l *Lib) ReduceScatter(send, recv uintptr, recvCount int, t DataType, op RedOp, c Comm, stream uintptr) error {
	if r, _, _ := purego.SyscallN(l.reduceScatter, send, recv, uintptr(recvCount), uintptr(t), uintptr(op), uintptr(c), stream); int32(r) != 0 {
		return l.fail(fmt.Sprintf("ncclReduceScatter(%d elements a rank)", recvCount), r)
	}
	return nil
}

// Broadcast queues ncclBroadcast of count elements from root.
func (l *Lib) Broadcast(send, recv uintptr, count int, t DataType, root int, c Comm, stream uintptr) error {
	if r, _, _ := purego.SyscallN(l.broadcast, send, recv, uintptr(count), uintptr(t), uintptr(root), uintptr(c), stream); int32(r) != 0 {
		return l.fail(fmt.Sprintf("ncclBroadcast(%d elements from rank %d)", count, root), r)
	}
	return nil
}
