// Package gpumem owns GPU message-buffer allocation for the runtime, the
// benchmarks and hazard probe H2, in one of three modes:
//
//   - plain: cuMemAlloc and cuMemFree on the calling thread. cuMemFree may
//     synchronise with the device: a free issued while a kernel runs can
//     wait for that kernel (hazard H2).
//   - worker: allocations as plain, frees handed to a worker goroutine on a
//     thread of its own, so the caller never waits for one (the fix MLX
//     chose, mlx#2099).
//   - pool: the device's stream-ordered pool (cuMemAllocAsync and
//     cuMemFreeAsync on a private non-blocking stream), which never
//     synchronises with other streams.
//
// Which mode is safe beside a running kernel is not assumed: probe H2
// measures it on the machine at hand, and the tuner picks the allocator
// mode from its verdicts. Option: gpu.alloc.
package gpumem
