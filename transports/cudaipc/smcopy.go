package cudaipc

import (
	_ "embed"
	"fmt"

	"github.com/gotune/gotune/internal/cuda"
)

// The two ways a single copy moves bytes (cudaipc.copy):
//
//   - ce: cuMemcpyAsync, which the driver hands to a copy engine. It runs
//     beside any kernel, whatever the kernel holds of the SMs.
//   - sm: a copy kernel (copy.ptx) on the rank's non-blocking stream, the way
//     NCCL moves data: it needs resident-block slots, so beside a kernel that
//     holds every SM it waits for that kernel to end.
//
// The SM copy covers device to device; a copy with host memory on either
// side stays on the copy engines.
const (
	CopyEngine = "ce"
	CopySM     = "sm"
)

// copyPTX is the copy kernel's source, JIT-compiled at New when
// cudaipc.copy=sm.
//
//go:embed copy.ptx
var copyPTX string

// copyEntry is the kernel's name in copy.ptx.
const copyEntry = "gotune_copy"

// copyBlock is the number of threads per block of the copy kernel.
const copyBlock = 512

// vectorBytes is what one thread moves per step of the body.
const vectorBytes = 16

// smCopy is the copy kernel loaded on the rank's device.
type smCopy struct {
	mod       *cuda.Module
	fn        *cuda.Function
	maxBlocks int // every resident-block slot of the device
	args      cuda.Args
}

func loadSMCopy(dev *cuda.Device) (*smCopy, error) {
	mod, err := cuda.LoadModule([]byte(copyPTX))
	if err != nil {
		return nil, fmt.Errorf("cudaipc: load the copy kernel: %w", err)
	}
	k := &smCopy{mod: mod}
	if k.fn, err = mod.Function(copyEntry); err != nil {
		mod.Unload()
		return nil, fmt.Errorf("cudaipc: %w", err)
	}
	perSM, err := k.fn.MaxActiveBlocksPerSM(copyBlock, 0)
	if err != nil || perSM <= 0 {
		mod.Unload()
		return nil, fmt.Errorf("cudaipc: copy kernel occupancy (%d blocks per SM): %v", perSM, err)
	}
	k.maxBlocks = perSM * max(dev.SMs, 1)
	return k, nil
}

// grid is the number of blocks for an n-byte copy: one thread per vector,
// up to every resident slot, and at least one block for the tail.
func (k *smCopy) grid(n int) int {
	vectors := n / vectorBytes
	return max(1, min((vectors+copyBlock-1)/copyBlock, k.maxBlocks))
}

// aligned reports whether the kernel can move n bytes between dst and src:
// its vector loads and stores need 16-byte aligned addresses.
func aligned(dst, src uintptr) bool { return (dst|src)%vectorBytes == 0 }

// launch queues the copy of n bytes from src to dst on s.
func (k *smCopy) launch(dst, src uintptr, n int, s *cuda.Stream) error {
	k.args.Reset()
	k.args.SetPtr(0, dst).SetPtr(1, src).Set(2, uint64(n))
	return k.fn.Launch(cuda.Dim3{X: k.grid(n)}, cuda.Dim3{X: copyBlock}, 0, s, &k.args)
}

func (k *smCopy) close() error {
	if k == nil {
		return nil
	}
	return k.mod.Unload()
}
