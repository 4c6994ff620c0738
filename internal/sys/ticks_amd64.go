package sys

// Ticks reads the time-stamp counter (RDTSC): a cheap clock for timing
// short stretches of work on one CPU, in ticks of a fixed frequency
// (constant_tsc), comparable only with other Ticks on the same machine.
func Ticks() uint64
