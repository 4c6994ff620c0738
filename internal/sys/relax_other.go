//go:build !amd64

package sys

import "unsafe"

// CPURelax is a no-op where no spin hint is wired up.
func CPURelax() {}

// PollFence is a no-op where no load fence is wired up.
func PollFence() {}

// PrefetchWrite is a no-op where no write prefetch is wired up.
func PrefetchWrite(p unsafe.Pointer) {}
