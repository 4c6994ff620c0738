//go:build amd64

package sys

// CPURelax tells the CPU that the caller is spinning (x86 PAUSE): it stops
// a polling loop from starving a hyper-thread sibling and eases the exit
// from the loop.
func CPURelax()
