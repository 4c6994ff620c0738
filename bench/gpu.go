package bench

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gotune/gotune/bench/gpuload"
	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cudaipc"
)

// GPU buffers and load (--mem, --gpus, --kernel).
//
// A rank has a GPU when either rank's buffers are not host memory or GPUs
// are listed: then both ranks open and bind theirs (GPUFor) on their locked
// measuring goroutine before the transport starts, allocate their message
// buffers of their own kind there and hand the transport views of them:
// the buffer's bytes for host-visible kinds, a view over the device address
// (sys.BytesAt) that only GPU copies may dereference for device memory.
// The acknowledgement and the zero-byte sync stay in host memory. A run
// whose ranks have no GPU never loads the driver.

// cudaLoad is cuda.Load. Every path of this package into the driver starts
// with it (checkGPUs in the launcher, openRankGPU in a rank), so a test can
// prove that a host-only run never reaches the driver.
var cudaLoad = cuda.Load

// LoadBound is the default bound of each launch of the GPU load kernel
// (--kernel-bound): a timed pass that outlasts it ran partly without load,
// and its point says so (load_late).
var LoadBound = min(gpuload.MaxDuration, time.Minute)

// bufferKinds are the memory kinds a rank's message buffers may have.
var bufferKinds = []cuda.MemKind{cuda.MemHost, cuda.MemPinned, cuda.MemDevice,
	cuda.MemManaged, cuda.MemManagedDevice, cuda.MemManagedHost}

// ParseMem reads --mem: one memory kind for both ranks, or OSU's SRC,DST
// (rank 0's buffers, rank 1's). Kinds: host, pinned, device, managed,
// managed-device, managed-host, or OSU's letters H, D, M, MD, MH. It
// returns a kind per rank.
func ParseMem(s string) ([]cuda.MemKind, error) {
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return nil, fmt.Errorf("%q: want KIND or SRC,DST (rank 0's buffers, rank 1's)", s)
	}
	kinds := make([]cuda.MemKind, 0, 2)
	for _, p := range parts {
		k, err := parseBufferKind(p)
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, k)
	}
	if len(kinds) == 1 {
		kinds = append(kinds, kinds[0])
	}
	return kinds, nil
}

func parseBufferKind(s string) (cuda.MemKind, error) {
	k, err := cuda.ParseMemKind(s)
	if err == nil && k == cuda.MemPool {
		return 0, fmt.Errorf("%q: pool memory is for allocation per message; a whole-run buffer of it is device memory: use device", s)
	}
	if err != nil || !slices.Contains(bufferKinds, k) {
		return 0, fmt.Errorf("unknown memory kind %q (want host, pinned, device, managed, managed-device or managed-host; or OSU's H, D, M, MD, MH)", s)
	}
	return k, nil
}

// ParseGPUs reads --gpus: device ordinals separated by commas; rank r uses
// the (r mod n)-th. The empty string is no list (GPUFor's default).
func ParseGPUs(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	gpus, err := cuda.ParseOrdinals(s)
	if err != nil {
		return nil, fmt.Errorf("%q: want device ordinals like 0,1", s)
	}
	return gpus, nil
}

// FormatGPUs writes a GPU list the way ParseGPUs reads it.
func FormatGPUs(gpus []int) string { return cuda.FormatOrdinals(gpus) }

// ParseKernel reads --kernel: the fraction of every GPU's resident-block
// slots the load kernel holds during the timed passes: none, partial, full,
// a fraction in [0, 1] or a percentage.
func ParseKernel(s string) (float64, error) { return gpuload.ParseFraction(s) }

// KernelName writes a load fraction the way --kernel names it.
func KernelName(f float64) string {
	switch f {
	case gpuload.None:
		return "none"
	case gpuload.Partial:
		return "partial"
	case gpuload.Full:
		return "full"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// GPUFor is the device ordinal rank uses: gpus[rank mod len(gpus)], or rank
// mod count without a list; count is the number of devices. The cudaipc
// transport picks its device by the same rule from its option cudaipc.gpus.
func GPUFor(rank int, gpus []int, count int) (int, error) {
	if count <= 0 {
		return 0, fmt.Errorf("no CUDA device")
	}
	g := cuda.OrdinalFor(rank, count, gpus)
	if g < 0 || g >= count {
		return 0, fmt.Errorf("--gpus %s: rank %d's device %d does not exist (%d CUDA device(s))", FormatGPUs(gpus), rank, g, count)
	}
	return g, nil
}

// MemKind is rank's buffer kind.
func (s *Spec) MemKind(rank int) cuda.MemKind {
	if len(s.Mem) == 0 {
		return cuda.MemHost
	}
	return s.Mem[rank%len(s.Mem)]
}

// UsesGPU reports whether the ranks open a GPU: a buffer kind other than
// host on either rank, or a GPU list.
func (s *Spec) UsesGPU() bool {
	return len(s.GPUs) > 0 || slices.ContainsFunc(s.Mem, func(k cuda.MemKind) bool { return k != cuda.MemHost })
}

// gpuFlag names what asks for a GPU, for errors: the first kind that is
// not host memory, else the GPU list.
func (s *Spec) gpuFlag() string {
	for _, k := range s.Mem {
		if k != cuda.MemHost {
			return "--mem " + k.String()
		}
	}
	return "--gpus " + FormatGPUs(s.GPUs)
}

// normalizeGPU is Normalize's part for the GPU fields.
func (s *Spec) normalizeGPU() error {
	switch len(s.Mem) {
	case 0:
	case 1:
		s.Mem = []cuda.MemKind{s.Mem[0], s.Mem[0]}
	case 2:
		s.Mem = slices.Clone(s.Mem)
	default:
		return fmt.Errorf("--mem: %d memory kinds for 2 ranks", len(s.Mem))
	}
	for _, k := range s.Mem {
		if !slices.Contains(bufferKinds, k) {
			return fmt.Errorf("--mem: %s is not a message buffer kind (want host, pinned, device, managed, managed-device or managed-host)", k)
		}
	}
	if drv, err := transports.Lookup(s.Transport); err == nil && drv.DeviceDefault && len(s.Mem) == 0 && (!s.Pattern.MultiRank() || s.Pattern.Collective()) {
		s.Mem = []cuda.MemKind{cuda.MemDevice, cuda.MemDevice}
	}
	if drv, err := transports.Lookup(s.Transport); err == nil && !drv.DeviceMemory {
		for _, k := range s.Mem {
			if !k.HostVisible() {
				return fmt.Errorf("--mem %s: transport %s moves host memory only (it would touch GPU memory with the CPU); use cudaipc", k, s.Transport)
			}
		}
	}
	for _, g := range s.GPUs {
		if g < 0 {
			return fmt.Errorf("--gpus %s: device ordinals are not negative", FormatGPUs(s.GPUs))
		}
	}
	opts, gpus, err := gpuOptions(s.Options, s.GPUs, transports.CheckKeys(transports.Options{cudaipc.KeyGPUs: ""}) == nil)
	if err != nil {
		return err
	}
	s.Options, s.GPUs = opts, gpus
	switch {
	case !s.UsesGPU():
		s.Mem = nil // host on both ranks: the spec of a run before --mem existed
	case len(s.Mem) == 0:
		s.Mem = []cuda.MemKind{cuda.MemHost, cuda.MemHost} // GPUs with host buffers: say so
	}
	if s.Pattern == AllocChurn && slices.ContainsFunc(s.Mem, func(k cuda.MemKind) bool { return k != cuda.MemHost }) {
		return fmt.Errorf("%s: the alloc pattern allocates host buffers per message: it takes --mem host", s.gpuFlag())
	}
	switch {
	case math.IsNaN(s.GPULoad) || s.GPULoad < 0 || s.GPULoad > 1:
		return fmt.Errorf("--kernel %v: out of [0, 1]", s.GPULoad)
	case s.GPULoad > 0 && !s.UsesGPU():
		return fmt.Errorf("--kernel %s: the load kernel runs on the ranks' GPUs, and with --mem host on both ranks and no --gpus the ranks have none: add --gpus (e.g. --gpus 0) or a GPU --mem", KernelName(s.GPULoad))
	case s.GPULoadBound < 0 || s.GPULoadBound > gpuload.MaxDuration:
		return fmt.Errorf("--kernel-bound %v: want a duration in (0, %v]", s.GPULoadBound, gpuload.MaxDuration)
	case s.GPULoad == 0 && s.GPULoadBound > 0:
		return fmt.Errorf("--kernel-bound %v: bounds the load kernel, and there is none: add --kernel", s.GPULoadBound)
	case s.GPULoad > 0 && s.GPULoadBound == 0:
		s.GPULoadBound = LoadBound
	}
	return nil
}

// gpuOptions reconciles the GPU list with the cudaipc transport's option
// (known: a registered transport takes it), so that the transport and the
// bench's buffers pick the same device: a list the option lacks goes into
// a copy of the options; an option set without a list gives the list; the
// two set differently is an error.
func gpuOptions(opts transports.Options, gpus []int, known bool) (transports.Options, []int, error) {
	v, set := opts[cudaipc.KeyGPUs]
	if !known || (!set && len(gpus) == 0) {
		return opts, gpus, nil
	}
	if !set {
		return opts.With(transports.Options{cudaipc.KeyGPUs: FormatGPUs(gpus)}), gpus, nil
	}
	fromOpt, err := ParseGPUs(v)
	if err != nil {
		return nil, nil, fmt.Errorf("option %s=%q: want device ordinals like 0,1", cudaipc.KeyGPUs, v)
	}
	if len(gpus) == 0 {
		return opts, fromOpt, nil
	}
	if !slices.Equal(gpus, fromOpt) {
		return nil, nil, fmt.Errorf("--gpus %s disagrees with --opt %s=%s: the transport's GPUs and the buffers' must be the same", FormatGPUs(gpus), cudaipc.KeyGPUs, v)
	}
	return opts, gpus, nil
}

// checkGPUs runs in the launcher before any rank starts: a spec that needs
// GPUs needs the driver and its devices.
func checkGPUs(s *Spec) error {
	if !s.UsesGPU() {
		return nil
	}
	if err := cudaLoad(); err != nil {
		return fmt.Errorf("bench: %s: CUDA not available: %w", s.gpuFlag(), err)
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		return fmt.Errorf("bench: %s: CUDA not available: %w", s.gpuFlag(), err)
	}
	return ranksGPUs(s, n)
}

// ranksGPUs checks that every rank of s has a device among n and refuses
// a load kernel beside device buffers on a GPU two ranks share: each rank
// runs the kernel on its own device, and on one H200 shared by both ranks
// every timed pass that copied to or from device memory waited for the
// kernel's bound, at a quarter of the GPU as at half (docs/reliability.md).
func ranksGPUs(s *Spec, n int) error {
	first := map[int]int{} // device ordinal: its first rank
	device := slices.ContainsFunc(s.Mem, func(k cuda.MemKind) bool { return !k.HostVisible() })
	for r := range s.RankCount() {
		g, err := GPUFor(r, s.GPUs, n)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		prev, shared := first[g]
		if shared && device && s.GPULoad > 0 {
			return fmt.Errorf("bench: --kernel %s with device buffers: ranks %d and %d share GPU %d (%d CUDA device(s)), and each runs the load kernel on it: "+
				"there a copy to or from device memory waits for the kernel until its bound; give each rank its own GPU (--gpus 0,1), host-visible buffers, or no --kernel",
				KernelName(s.GPULoad), prev, r, g, n)
		}
		if !shared {
			first[g] = r
		}
	}
	return nil
}

// rankGPU is a rank's device, bound on its measuring thread, and the load
// kernel when there is one.
type rankGPU struct {
	dev  *cuda.Device
	kind cuda.MemKind // this rank's message buffers
	load *gpuLoad     // nil without --kernel
}

// openRankGPU opens and binds rank's device when the spec gives the ranks
// GPUs (nil otherwise, without loading the driver). It locks the calling
// goroutine to its thread (a rank's measuring goroutine already is: the
// lock nests) until close.
func openRankGPU(s *Spec, rank int) (*rankGPU, error) {
	if !s.UsesGPU() {
		return nil, nil
	}
	if err := cudaLoad(); err != nil {
		return nil, fmt.Errorf("rank %d: %s: CUDA not available: %w", rank, s.gpuFlag(), err)
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", rank, err)
	}
	ord, err := GPUFor(rank, s.GPUs, n)
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", rank, err)
	}
	runtime.LockOSThread()
	dev, err := cuda.Open(ord)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("rank %d: %w", rank, err)
	}
	g := &rankGPU{dev: dev, kind: s.MemKind(rank)}
	if err := g.setup(s); err != nil {
		g.close()
		return nil, fmt.Errorf("rank %d on %s: %w", rank, dev, err)
	}
	return g, nil
}

func (g *rankGPU) setup(s *Spec) error {
	if err := g.dev.Bind(); err != nil {
		return err
	}
	if s.GPULoad <= 0 {
		return nil
	}
	if g.kind.Managed() && !g.dev.ConcurrentManagedAccess {
		return fmt.Errorf("--mem %s with --kernel: the host may not touch managed memory while a kernel runs on this device (no concurrent managed access)", g.kind)
	}
	var err error
	g.load, err = newGPULoad(g.dev, s.GPULoad, s.loadBound())
	return err
}

// info is what the result records of the rank's GPU.
func (g *rankGPU) info(rank int) hostinfo.RankInfo {
	return hostinfo.RankInfo{Rank: rank, Mem: g.kind.String(), GPU: &hostinfo.GPUInfo{Ordinal: g.dev.Ordinal, Name: g.dev.Name, PCIBusID: g.dev.PCIBusID}}
}

// close stops the load kernel, releases the device and unlocks the thread.
// The rank's buffers must be freed first (arena.free).
func (g *rankGPU) close() error {
	if g == nil {
		return nil
	}
	err := g.load.close()
	keepFirst(&err, g.dev.Close())
	runtime.UnlockOSThread()
	return err
}

// alloc returns a view of a fresh buffer of n bytes of the rank's kind and
// the buffer, to free: its bytes when the host may touch them, else a view
// over the device address that only GPU copies may dereference.
func (g *rankGPU) alloc(n int) ([]byte, *cuda.Buffer, error) {
	b, err := g.dev.Alloc(g.kind, max(n, 1))
	if err != nil {
		return nil, nil, fmt.Errorf("allocate %d-byte %s message buffer: %w", n, g.kind, err)
	}
	if g.kind.HostVisible() {
		return b.Bytes()[:n], b, nil
	}
	return sys.BytesAt(b.Ptr(), n), b, nil
}

// newStager returns what fills and checks device buffers of up to n bytes
// for --validate: a pinned host scratch and a stream of its own. The stream
// is non-blocking: the synchronous copies (legacy stream) would wait for the
// load kernel, which runs on a blocking stream until the pass ends (hazard
// H4).
func (g *rankGPU) newStager(n int) (*stager, error) {
	b, err := g.dev.Alloc(cuda.MemPinned, max(n, 1))
	if err != nil {
		return nil, fmt.Errorf("allocate %d-byte validation staging buffer: %w", n, err)
	}
	s, err := cuda.NewStream(cuda.StreamNonBlocking)
	if err != nil {
		b.Free()
		return nil, err
	}
	return &stager{buf: b, host: b.Bytes()[:n], s: s}, nil
}

// stager moves validation patterns into and out of device buffers.
type stager struct {
	buf  *cuda.Buffer
	host []byte // buf's bytes
	s    *cuda.Stream
}

// copy copies src into dst, one of them the host scratch and the other a
// device buffer view, on the stager's stream.
func (st *stager) copy(dst, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if err := cuda.CopyAsync(sys.AddressOf(dst), sys.AddressOf(src), len(src), st.s); err != nil {
		return err
	}
	return st.s.Synchronize()
}

func (st *stager) close() error {
	if st == nil {
		return nil
	}
	err := st.s.Destroy()
	keepFirst(&err, st.buf.Free())
	return err
}

// gpuLoad is the spin kernel that holds part of the rank's GPU during every
// timed pass, as an application's compute kernel would: on a blocking
// stream of its own, released by a flag in pinned memory that the host sets
// when the pass ends.
type gpuLoad struct {
	k       *gpuload.Kernel
	s       *cuda.Stream // blocking (CU_STREAM_DEFAULT)
	flag    *cuda.Buffer // pinned, device-mapped
	word    *uint32      // the flag's first word, as the host sees it
	spec    gpuload.Spec
	ordinal int // the device's
	running bool
	late    int // passes the kernel's time bound ended before the host released it
}

// loadBound is the load kernel's time bound per launch.
func (s *Spec) loadBound() time.Duration {
	if s.GPULoadBound > 0 {
		return s.GPULoadBound
	}
	return LoadBound
}

func newGPULoad(dev *cuda.Device, fraction float64, bound time.Duration) (*gpuLoad, error) {
	k, err := gpuload.Load(dev)
	if err != nil {
		return nil, err
	}
	l := &gpuLoad{k: k, ordinal: dev.Ordinal}
	if l.s, err = cuda.NewStream(cuda.StreamBlocking); err != nil {
		l.close()
		return nil, err
	}
	if l.flag, err = dev.Alloc(cuda.MemPinned, 8); err != nil {
		l.close()
		return nil, err
	}
	l.word = (*uint32)(unsafe.Pointer(unsafe.SliceData(l.flag.Bytes())))
	l.spec = gpuload.Spec{Fraction: fraction, Duration: bound, Flag: l.flag.Ptr()}
	return l, nil
}

// lateCount is how many passes outlasted the kernel's time bound so far.
func (l *gpuLoad) lateCount() int {
	if l == nil {
		return 0
	}
	return l.late
}

// start launches the kernel with its flag cleared; it returns at once.
func (l *gpuLoad) start() error {
	if l == nil {
		return nil
	}
	atomic.StoreUint32(l.word, 0)
	if err := l.k.Launch(l.s, l.spec); err != nil {
		return fmt.Errorf("launch the GPU load kernel: %w", err)
	}
	l.running = true
	return nil
}

// stop releases the kernel and waits for it to end, counting a kernel that
// had already ended at its time bound.
func (l *gpuLoad) stop() error {
	if l == nil || !l.running {
		return nil
	}
	l.running = false
	done, err := l.s.Query()
	if err != nil {
		return fmt.Errorf("GPU load kernel: %w", err)
	}
	if done {
		l.late++
	}
	atomic.StoreUint32(l.word, 1)
	if err := l.s.Synchronize(); err != nil {
		return fmt.Errorf("GPU load kernel: %w", err)
	}
	return nil
}

func (l *gpuLoad) close() error {
	if l == nil {
		return nil
	}
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	if l.word != nil {
		atomic.StoreUint32(l.word, 1) // a kernel still running ends now
	}
	if l.s != nil {
		keep(l.s.Synchronize())
		keep(l.s.Destroy())
	}
	keep(l.k.Close())
	keep(l.flag.Free())
	return first
}
