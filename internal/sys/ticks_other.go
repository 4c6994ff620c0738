//go:build !amd64

package sys

import "time"

var ticksEpoch = time.Now()

// Ticks is a monotonic clock in nanoseconds where no cycle counter is
// wired up.
func Ticks() uint64 { return uint64(time.Since(ticksEpoch)) }
