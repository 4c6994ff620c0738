package sys

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// membarrier(2) commands.
const (
	membarrierPrivateExpedited         = 1 << 3
	membarrierRegisterPrivateExpedited = 1 << 4
)

// RegisterProcessBarrier enables ProcessBarrier for this process
// (membarrier MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, Linux 4.14+).
func RegisterProcessBarrier() error {
	if _, _, e := unix.Syscall(unix.SYS_MEMBARRIER, membarrierRegisterPrivateExpedited, 0, 0); e != 0 {
		return NotSupported("membarrier", "register private expedited", e)
	}
	return nil
}

// ProcessBarrier makes every running thread of this process execute a full
// memory barrier before it returns. With it, one side of a Dekker-style
// hand-off can use plain stores (StoreRelaxed) and leave the fence to the
// rare other side.
func ProcessBarrier() error {
	if _, _, e := unix.Syscall(unix.SYS_MEMBARRIER, membarrierPrivateExpedited, 0, 0); e != 0 {
		return fmt.Errorf("membarrier: %w", e)
	}
	return nil
}
