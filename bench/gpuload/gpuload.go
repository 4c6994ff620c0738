// Package gpuload is the GPU load generator of gotune's benchmarks and
// hazard probes: one bounded spin kernel, hand-written in PTX and embedded,
// that holds a chosen fraction of the GPU's resident-block slots for a
// chosen time, or until a flag in memory is set.
//
// The flag form is what hazard H4 needs: a kernel that waits for a message
// to set a flag. Launched on a blocking stream, it holds up a synchronous
// copy on the legacy stream that would set the flag, so the copy's latency
// equals the spin time (the coupled path); launched on a non-blocking
// stream, the same copy sets the flag at once and the kernel ends. The time
// bound keeps the hazardous variant from ever hanging.
package gpuload

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gotune/gotune/internal/cuda"
)

// PTX is the kernel's source, JIT-compiled by the driver at Load.
//
//go:embed spin.ptx
var PTX string

// Entry is the kernel's name in PTX.
const Entry = "gotune_spin"

// BlockSize is the number of threads per block of every launch.
const BlockSize = 128

// MaxDuration bounds one launch's spin time.
const MaxDuration = 10 * time.Minute

// The named load levels.
const (
	None    = 0.0 // no kernel
	Partial = 0.5 // half the resident-block slots
	Full    = 1.0 // every resident-block slot of every SM
)

// ParseFraction parses a load level: none, partial, full, a fraction in
// [0, 1] or a percentage ("25%").
func ParseFraction(s string) (float64, error) {
	l := strings.ToLower(strings.TrimSpace(s))
	switch l {
	case "none", "off", "0":
		return None, nil
	case "partial", "half":
		return Partial, nil
	case "full", "all":
		return Full, nil
	}
	pct := strings.HasSuffix(l, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(l, "%"), 64)
	if err != nil {
		return 0, fmt.Errorf("GPU load %q: want none, partial, full, a fraction in [0,1] or a percentage", s)
	}
	if pct {
		v /= 100
	}
	if math.IsNaN(v) || v < 0 || v > 1 {
		return 0, fmt.Errorf("GPU load %q: out of [0, 1]", s)
	}
	return v, nil
}

// Spec is one launch.
type Spec struct {
	// Fraction of the GPU's resident-block slots to hold, 0..1: 1 keeps every
	// SM full, so no other kernel can start until this one ends.
	Fraction float64
	// Duration bounds the spin (required, at most MaxDuration).
	Duration time.Duration
	// Flag, when not 0, is the device-accessible address of a u32 (device,
	// pinned or managed memory): the kernel ends as soon as it is not 0.
	Flag uintptr
}

// Validate checks a Spec.
func (s Spec) Validate() error {
	if math.IsNaN(s.Fraction) || s.Fraction < 0 || s.Fraction > 1 {
		return fmt.Errorf("GPU load fraction %v out of [0, 1]", s.Fraction)
	}
	if s.Duration <= 0 {
		return fmt.Errorf("GPU load duration %v: the kernel must be bounded", s.Duration)
	}
	if s.Duration > MaxDuration {
		return fmt.Errorf("GPU load duration %v exceeds %v", s.Duration, MaxDuration)
	}
	return nil
}

// Grid returns the number of blocks that hold fraction of sms
// multiprocessors' blocksPerSM resident-block slots: ceil(fraction × sms ×
// blocksPerSM), at least 1 when fraction > 0. The block scheduler spreads
// the blocks over the SMs, so a partial load leaves room on every SM rather
// than idling some.
func Grid(fraction float64, sms, blocksPerSM int) int {
	if fraction <= 0 || sms <= 0 || blocksPerSM <= 0 {
		return 0
	}
	if fraction > 1 {
		fraction = 1
	}
	slots := float64(sms * blocksPerSM)
	// Tolerate the rounding of products like 0.3 × 100 × 10 = 300.00000000000006.
	g := int(math.Ceil(fraction*slots - 1e-9))
	return max(1, min(g, sms*blocksPerSM))
}

// Kernel is the loaded spin kernel on one device.
type Kernel struct {
	dev         *cuda.Device
	mod         *cuda.Module
	fn          *cuda.Function
	blocksPerSM int

	counter  *cuda.Buffer // device u32: blocks done
	readback *cuda.Buffer // pinned u32: the counter's copy and a zero source
	side     *cuda.Stream // non-blocking: counter reads and resets

	mu   sync.Mutex // guards args
	args cuda.Args
}

// Load JIT-compiles the kernel for dev, in the bound context (dev's, on a
// locked thread), and sizes a full load with the occupancy query.
func Load(dev *cuda.Device) (*Kernel, error) {
	mod, err := cuda.LoadModule([]byte(PTX))
	if err != nil {
		return nil, fmt.Errorf("load GPU load kernel on %s: %w", dev, err)
	}
	k := &Kernel{dev: dev, mod: mod}
	if err := k.init(); err != nil {
		k.Close()
		return nil, fmt.Errorf("load GPU load kernel on %s: %w", dev, err)
	}
	return k, nil
}

func (k *Kernel) init() error {
	var err error
	if k.fn, err = k.mod.Function(Entry); err != nil {
		return err
	}
	if k.blocksPerSM, err = k.fn.MaxActiveBlocksPerSM(BlockSize, 0); err != nil {
		return err
	}
	if k.blocksPerSM <= 0 {
		return fmt.Errorf("occupancy query: no block of %d threads fits an SM", BlockSize)
	}
	if k.counter, err = k.dev.Alloc(cuda.MemDevice, 8); err != nil {
		return err
	}
	if k.readback, err = k.dev.Alloc(cuda.MemPinned, 8); err != nil {
		return err
	}
	if k.side, err = cuda.NewStream(cuda.StreamNonBlocking); err != nil {
		return err
	}
	return k.ResetCompleted()
}

// Close frees the kernel's module and memory (in the bound context).
func (k *Kernel) Close() error {
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	if k.side != nil {
		keep(k.side.Synchronize())
		keep(k.side.Destroy())
	}
	keep(k.counter.Free())
	keep(k.readback.Free())
	keep(k.mod.Unload())
	return first
}

// BlocksPerSM returns the occupancy query's answer for BlockSize threads.
func (k *Kernel) BlocksPerSM() int { return k.blocksPerSM }

// Grid returns the number of blocks Launch starts for fraction.
func (k *Kernel) Grid(fraction float64) int { return Grid(fraction, k.dev.SMs, k.blocksPerSM) }

// Launch queues the kernel on s and returns at once: it never waits for the
// kernel. A zero Fraction launches nothing. Each block that finishes adds 1
// to the count Completed reads.
func (k *Kernel) Launch(s *cuda.Stream, spec Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	grid := k.Grid(spec.Fraction)
	if grid == 0 {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.args.SetPtr(0, spec.Flag).Set(1, uint64(spec.Duration.Nanoseconds())).SetPtr(2, k.counter.Ptr())
	return k.fn.Launch(cuda.Dim3{X: grid}, cuda.Dim3{X: BlockSize}, 0, s, &k.args)
}

// Completed returns how many blocks have finished since the last reset. It
// reads the counter through a private non-blocking stream, so it does not
// wait for kernels on blocking streams; the copy itself may wait while the
// spin kernel holds the GPU.
func (k *Kernel) Completed() (uint32, error) {
	if err := cuda.CopyAsync(k.readback.Ptr(), k.counter.Ptr(), 4, k.side); err != nil {
		return 0, err
	}
	if err := k.side.Synchronize(); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(k.readback.Bytes()), nil
}

// ResetCompleted sets the completed-block count to 0 (with a copy from
// pinned memory, not a memset kernel, so it needs no free SM).
func (k *Kernel) ResetCompleted() error {
	clear(k.readback.Bytes())
	if err := cuda.CopyAsync(k.counter.Ptr(), k.readback.Ptr(), 4, k.side); err != nil {
		return err
	}
	return k.side.Synchronize()
}
