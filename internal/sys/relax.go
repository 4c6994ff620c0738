//go:build amd64

package sys

import "unsafe"

// CPURelax tells the CPU that the caller is spinning (x86 PAUSE): it stops
// a polling loop from starving a hyper-thread sibling and eases the exit
// from the loop.
func CPURelax()

// PollFence is x86's LFENCE, for a polling loop: each poll's load waits
// for the one before, so the loop keeps one load of the polled line in
// flight instead of a speculative stream of them. Why: on AMD cores a
// stream of loads delays the writer's ownership of the line (a one-line
// ping-pong took 60 ns polling flat out and 30 with LFENCE between polls
// on the development VM), and unlike PAUSE (140 cycles on recent Intel
// cores) it adds no fixed delay.
func PollFence()

// PrefetchWrite asks for the cache line at p in exclusive state
// (PREFETCHW), ahead of a store to it: a writer of several lines another
// core holds then fetches them at once instead of one store's ownership
// after the other's.
func PrefetchWrite(p unsafe.Pointer)
