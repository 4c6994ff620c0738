//go:build !amd64

package sys

// CPURelax is a no-op where no spin hint is wired up.
func CPURelax() {}

// PollFence is a no-op where no load fence is wired up.
func PollFence() {}
