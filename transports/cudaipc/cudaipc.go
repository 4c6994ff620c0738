package cudaipc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/gpumem"
	"github.com/gotune/gotune/transports/sm"
)

// Params configure the GPU side of the transport.
type Params struct {
	// Staging is "async" (cuMemcpyAsync on a non-blocking stream) or
	// "sync" (the legacy stream: UNSAFE next to a kernel on a blocking
	// stream, hazard H4).
	Staging string
	// Threshold is the smallest device message sent by CUDA IPC; smaller
	// ones are staged through the cells and fragments.
	Threshold int
	// PinnedThreshold is the smallest send from pinned host memory that
	// offers the receiver a single copy: into a device receive, one DMA
	// from the sender's buffer (a push); into a host receive, a round trip
	// more than the fragments alone.
	PinnedThreshold int
	// Copy is how a single copy between device buffers moves: CopyEngine
	// (cuMemcpyAsync) or CopySM (a copy kernel, which needs free SMs).
	Copy string
	// Completion is how a single copy's end reaches both sides:
	// CompleteEvent (an IPC event, FIN at once), CompleteSync (FIN once
	// cuStreamSynchronize returns) or CompleteFlag (FIN at once, a number
	// the stream writes into shared memory after the copy).
	Completion string
	// Relay is the largest device-to-device single copy moved by the
	// rank's relay block (relay.go) instead of its copy stream; 0 starts
	// no relay. It needs a marking completion (event or flag).
	Relay int
	// Cache is how many opened peer allocations a rank keeps per peer
	// (least recently used closed first); 0 keeps all.
	Cache int
	// GPUs maps ranks to devices: rank r binds GPUs[r mod len]; empty
	// means r mod the device count.
	GPUs []int
	// Alloc is the mode of the allocator the transport hands out
	// (gpu.alloc).
	Alloc gpumem.Mode
}

// DefaultAlloc is the built-in gpu.alloc: the stream-ordered pool. Why:
// it is the one mode probe H2 never caught waiting for a running kernel
// over repeated device runs (docs/hazards.md, H2).
const DefaultAlloc = gpumem.Pool

// Option keys.
const (
	KeyStaging, KeyThreshold, KeyPinnedThreshold = "cudaipc.staging", "cudaipc.threshold", "cudaipc.pinned-threshold"
	KeyCopy, KeyCompletion, KeyCache, KeyGPUs    = "cudaipc.copy", "cudaipc.completion", "cudaipc.cache", "cudaipc.gpus"
	KeyRelay                                     = "cudaipc.relay"
)

// Options documents the options ParseParams reads (besides sm.* and gpu.alloc).
var Options = &transports.OptionSet{Name: "cudaipc", Options: []transports.Option{
	{Key: KeyStaging, Type: "async|sync", Default: "async", Help: "async (device messages below the threshold staged on a non-blocking stream) or sync (on the legacy stream: UNSAFE beside a kernel on a blocking stream, hazard H4)"},
	{Key: KeyThreshold, Type: "size", Default: transports.FormatSize(DefaultThreshold), Help: "smallest device message sent by CUDA IPC single copy (smaller ones are staged through shared memory)"},
	{Key: KeyPinnedThreshold, Type: "size", Default: transports.FormatSize(DefaultPinnedThreshold), Help: "smallest send from pinned host memory offered to the receiver for single copy (a device receive is written by one DMA from the sender's buffer; a host receive costs a round trip more)"},
	{Key: KeyCopy, Type: CopyEngine + "|" + CopySM, Default: CopyEngine, Help: "ce (single copies by the copy engines, cuMemcpyAsync) or sm (device-to-device single copies by a copy kernel, which waits for free SMs)"},
	{Key: KeyCompletion, Type: strings.Join(Completions, "|"), Default: CompleteEvent, Help: "event (FIN as soon as a single copy is queued; both sides poll the copying rank's IPC event), sync (FIN after cuStreamSynchronize) or flag (FIN at once; the copy's stream then writes a number into shared memory that both sides poll with a load)"},
	{Key: KeyRelay, Type: "size", Default: "0", Help: "largest device-to-device single copy moved by the rank's relay kernel (one block that polls pinned host memory while copies come and ends after about 0.1 ms idle: no launch and no copy engine per message; calls that wait for the whole context wait for it while it runs; ranks sharing a GPU are refused: their contexts would time-slice it); 0: no relay. Needs completion event or flag"},
	{Key: KeyCache, Type: "int", Default: transports.FormatSize(DefaultCache), Help: "opened peer allocations kept per peer (0: all)"},
	{Key: KeyGPUs, Type: "list", Help: "GPU ordinals by rank, comma-separated (rank r takes the (r mod n)-th; default r mod the device count)"},
}}

// DefaultThreshold is the built-in cudaipc.threshold: every device send
// goes by CUDA IPC. Why: one-way device-to-device latency is lower by IPC
// than staged through shared memory even at 8 B (docs/performance.md,
// GPU).
const DefaultThreshold = 0

// DefaultPinnedThreshold is the built-in cudaipc.pinned-threshold: from
// 256 KiB a round trip costs a host receive little next to the copy.
const DefaultPinnedThreshold = 256 << 10

// cudaipc.completion values.
const (
	CompleteEvent = "event"
	CompleteSync  = "sync"
	CompleteFlag  = "flag"
)

// Completions are the cudaipc.completion values, the default first.
var Completions = []string{CompleteEvent, CompleteSync, CompleteFlag}

// DefaultCache is the built-in cudaipc.cache.
const DefaultCache = 64

// ParseParams reads cudaipc.* options.
func ParseParams(o transports.Options) (Params, error) {
	p := Params{}
	var err error
	if p.Staging, err = o.String(KeyStaging, "async", "async", "sync"); err != nil {
		return p, err
	}
	if p.Threshold, err = o.Int(KeyThreshold, DefaultThreshold); err != nil {
		return p, err
	}
	if p.PinnedThreshold, err = o.Int(KeyPinnedThreshold, DefaultPinnedThreshold); err != nil {
		return p, err
	}
	if p.Copy, err = o.String(KeyCopy, CopyEngine, CopyEngine, CopySM); err != nil {
		return p, err
	}
	if p.Completion, err = o.String(KeyCompletion, CompleteEvent, Completions...); err != nil {
		return p, err
	}
	if p.Relay, err = o.Int(KeyRelay, 0); err != nil {
		return p, err
	}
	if p.Relay > 0 && p.Completion == CompleteSync {
		return p, fmt.Errorf("option %s=%d: the relay completes by its own word, which %s=%s does not wait for: use %s or %s",
			KeyRelay, p.Relay, KeyCompletion, CompleteSync, CompleteEvent, CompleteFlag)
	}
	if p.Relay < 0 || p.Relay >= relayStop {
		return p, fmt.Errorf("option %s=%d: out of range (0 to %d)", KeyRelay, p.Relay, relayStop-1)
	}
	if p.Cache, err = o.Int(KeyCache, DefaultCache); err != nil {
		return p, err
	}
	if p.Alloc, err = gpumem.ModeOption(o, DefaultAlloc); err != nil {
		return p, err
	}
	if s, ok := o[KeyGPUs]; ok {
		if p.GPUs, err = cuda.ParseOrdinals(s); err != nil {
			return p, fmt.Errorf("option %s=%q: %w", KeyGPUs, s, err)
		}
	}
	return p, nil
}

// Options renders p as the options ParseParams reads back into p. Every key
// is written (gpu.alloc too, which the transport reads), so the result means
// the same to a build whose defaults differ; GPUs is left out when empty,
// which means rank r takes device r mod the device count.
func (p Params) Options() transports.Options {
	itoa := strconv.Itoa
	o := transports.Options{KeyStaging: p.Staging, KeyThreshold: itoa(p.Threshold), KeyPinnedThreshold: itoa(p.PinnedThreshold),
		KeyCopy: p.Copy, KeyCompletion: p.Completion, KeyRelay: itoa(p.Relay), KeyCache: itoa(p.Cache), gpumem.OptionKey: string(p.Alloc)}
	if len(p.GPUs) > 0 {
		o[KeyGPUs] = cuda.FormatOrdinals(p.GPUs)
	}
	return o
}

// Polling is o without sm.progress, which the transport takes only as poll
// (a progress thread holds no CUDA context): how options decided for the
// sm engine are handed to it. o is not changed.
func Polling(o transports.Options) transports.Options {
	out := o.With(nil)
	delete(out, sm.KeyProgress)
	return out
}

// ProfileOptions are the cudaipc and gpu.alloc options a profile's GPU
// section implies: the keys it decides, the others left to the defaults.
func ProfileOptions(g *profile.GPU) transports.Options {
	o := transports.Options{KeyThreshold: fmt.Sprint(g.IPCThreshold), KeyStaging: g.Staging,
		KeyPinnedThreshold: fmt.Sprint(g.PinnedThreshold)}
	if g.GPUs != "" {
		o[KeyGPUs] = g.GPUs
	}
	if g.Copy != "" {
		o[KeyCopy] = g.Copy
	}
	if g.Completion != "" {
		o[KeyCompletion] = g.Completion
	}
	if g.Relay > 0 {
		o[KeyRelay] = fmt.Sprint(g.Relay)
	}
	if g.IPCCache > 0 {
		o[KeyCache] = fmt.Sprint(g.IPCCache)
	}
	if g.Allocator != "" {
		o[gpumem.OptionKey] = g.Allocator
	}
	return o
}

func init() {
	transports.Register(&transports.Driver{
		Name:         "cudaipc",
		NodeLocal:    true,
		Options:      []*transports.OptionSet{sm.Options, Options, gpumem.Options},
		DeviceMemory: true,
		SharedBytes:  sharedBytes,
		New:          New,
		Check:        Check,
	})
}

// sharedBytes: sm's channels, then one handle table per rank.
func sharedBytes(size int, o transports.Options) (int, error) {
	p, err := sm.ParseParams(o)
	if err != nil {
		return 0, err
	}
	seg, err := p.JobBytes(size)
	if err != nil {
		return 0, err
	}
	return seg + size*tableBytes, nil
}

// Transport is the sm engine over GPU memory, plus what it holds of CUDA.
type Transport struct {
	*sm.Endpoint
	dev      *cuda.Device
	stream   *cuda.Stream
	copier   *copier
	events   *completions // nil with cudaipc.completion=sync
	segment  []byte       // the engine's and the tables' bytes, registered with the driver
	alloc    gpumem.Mode
	buffers  *gpumem.Allocator // made by the first Allocator call
	released bool
}

// Allocator returns the allocator of GPU message buffers in the mode the
// options chose (gpu.alloc), made on first use on the calling thread,
// which must be the rank's (its context bound).
func (t *Transport) Allocator() (*gpumem.Allocator, error) {
	if t.buffers == nil {
		a, err := gpumem.New(t.dev, t.alloc)
		if err != nil {
			return nil, fmt.Errorf("cudaipc: %w", err)
		}
		t.buffers = a
	}
	return t.buffers, nil
}

// New builds the transport in a rank whose goroutine is locked to its OS
// thread (the rank runtime does that): it binds the rank's GPU there.
func New(env transports.Env) (transports.Transport, error) {
	sp, err := sm.ParseParams(env.Options)
	if err != nil {
		return nil, err
	}
	if sp.Progress == "thread" {
		return nil, errors.New("cudaipc: sm.progress=thread is not supported: the progress thread holds no CUDA context")
	}
	p, err := ParseParams(env.Options)
	if err != nil {
		return nil, err
	}
	count, err := cuda.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("cudaipc: %w", err)
	}
	if count == 0 {
		return nil, fmt.Errorf("cudaipc: %w: no CUDA device", transports.ErrNotSupported)
	}
	ordinal := cuda.OrdinalFor(env.Rank, count, p.GPUs)
	if ordinal >= count {
		return nil, fmt.Errorf("cudaipc: rank %d: GPU %d of %d devices", env.Rank, ordinal, count)
	}
	if p.Relay > 0 {
		for r := range env.Size {
			if g := cuda.OrdinalFor(r, count, p.GPUs); g == ordinal && r != env.Rank {
				return nil, fmt.Errorf("cudaipc: %s=%d: ranks %d and %d share GPU %d (%d CUDA device(s)): each would run its relay block "+
					"in a context of its own, and the GPU time-slices contexts, so every message would wait for the other's slice; "+
					"give each rank its own GPU (%s) or set %s=0", KeyRelay, p.Relay, min(r, env.Rank), max(r, env.Rank), g, count, KeyGPUs, KeyRelay)
			}
		}
	}
	t := &Transport{alloc: p.Alloc}
	if err := t.open(env, sp, p, ordinal); err != nil {
		t.release()
		return nil, err
	}
	return t, nil
}

func (t *Transport) open(env transports.Env, sp sm.Params, p Params, ordinal int) error {
	var err error
	if t.dev, err = cuda.Open(ordinal); err != nil {
		return fmt.Errorf("cudaipc: rank %d: %w", env.Rank, err)
	}
	if err := t.dev.Bind(); err != nil {
		return fmt.Errorf("cudaipc: rank %d: %w", env.Rank, err)
	}
	if t.stream, err = cuda.NewStream(cuda.StreamNonBlocking); err != nil {
		return fmt.Errorf("cudaipc: %w", err)
	}
	smBytes := sp.SegmentBytes(env.Size)
	if len(env.Segment) < smBytes+env.Size*tableBytes {
		return fmt.Errorf("cudaipc: segment of %d bytes, need %d", len(env.Segment), smBytes+env.Size*tableBytes)
	}
	c := &copier{p: p, self: env.Rank, dev: t.dev, stream: t.stream, rankOf: map[int]int{}}
	for r := range env.Size {
		tb, err := tableAt(env.Segment[smBytes+r*tableBytes:])
		if err != nil {
			return err
		}
		c.tables = append(c.tables, tb)
		c.opened = append(c.opened, &openCache{limit: p.Cache})
		c.rankOf[env.PIDs[r]] = r
	}
	t.copier = c
	// Staging copies to and from the cells and fragments are DMA once the
	// driver knows the memory; the tables' flags are then the GPU's to
	// write (cudaipc.completion=flag).
	all := env.Segment[:smBytes+env.Size*tableBytes]
	if err := cuda.RegisterHost(all, 0); err != nil && !errors.Is(err, cuda.ErrHostMemoryRegistered) {
		return fmt.Errorf("cudaipc: register the shared segment: %w", err)
	}
	t.segment = all
	if p.Relay > 0 {
		if c.relay, err = startRelay(c.tables[env.Rank].relay); err != nil {
			return err
		}
	}
	var single sm.SingleCopy = c
	switch p.Completion {
	case CompleteEvent:
		if t.events, err = newCompletions(env.Rank, c.tables); err != nil {
			return err
		}
		single = markingCopier{copier: c, marks: t.events, relayMax: p.Relay}
	case CompleteFlag:
		flags, err := newFlagCompletions(env.Rank, c.tables, c.stream)
		if err != nil {
			return err
		}
		single = markingCopier{copier: c, marks: flags, relayMax: p.Relay}
	}
	if p.Copy == CopySM {
		if c.kernel, err = loadSMCopy(t.dev); err != nil {
			return err
		}
	}
	seg := env.Segment[:smBytes]
	mem := &memory{own: c.tables[env.Rank], stream: t.stream, sync: p.Staging == "sync"}
	smEnv := env
	smEnv.Segment = seg
	if t.Endpoint, err = sm.NewWithMemory(smEnv, sp, single, mem, "cudaipc"); err != nil {
		return err
	}
	return nil
}

// GPU is the device the rank bound.
func (t *Transport) GPU() *cuda.Device { return t.dev }

// Close closes the engine, then unmaps peers' memory and releases CUDA.
func (t *Transport) Close() error {
	err := t.Endpoint.Close()
	return errors.Join(err, t.release())
}

func (t *Transport) release() error {
	if t.released {
		return nil
	}
	t.released = true
	var errs []error
	if t.copier != nil && t.copier.relay != nil { // first: it may copy into buffers and mappings closed below
		if err := t.copier.relay.stop(); err != nil {
			// Its block may still run, and every free below would wait for it.
			return fmt.Errorf("%w (the rank's CUDA resources are left to the process's exit)", err)
		}
	}
	if t.buffers != nil {
		errs = append(errs, t.buffers.Close())
	}
	if t.copier != nil {
		errs = append(errs, t.copier.close())
	}
	if t.events != nil {
		errs = append(errs, t.events.close())
	}
	if t.segment != nil {
		errs = append(errs, cuda.UnregisterHost(t.segment))
	}
	if t.stream != nil {
		errs = append(errs, t.stream.Destroy())
	}
	if t.dev != nil {
		errs = append(errs, t.dev.Close())
	}
	return errors.Join(errs...)
}

// Check reports whether CUDA is usable here (gotune doctor).
func Check(transports.Transport, transports.Env) error {
	n, err := cuda.DeviceCount()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: no CUDA device", transports.ErrNotSupported)
	}
	return nil
}
