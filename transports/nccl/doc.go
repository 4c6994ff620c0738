// Package nccl is the transport that moves messages through NCCL
// (libnccl.so.2, loaded at run time by internal/nccl): each rank binds one
// GPU, rank 0 makes the communicator's unique id and hands it to the
// others over the job's own allgather, and every rank joins with
// ncclCommInitRankScalable.
//
// Sends and receives are queued, not launched: Wait (and the blocking
// Send and Recv) launches everything queued as one NCCL group on the
// rank's stream and records an event after it, so a window of sends, or a
// send and a receive between the same two ranks, cannot wait on each
// other (NCCL matches a pair's operations in the order both sides issue
// them). A request completes when its group's event does.
//
// Buffers are whatever a GPU can address (device, pinned and managed
// memory); pageable host memory, such as a benchmark's acknowledgement,
// is staged through device scratch by synchronous copies. NCCL carries
// no envelope: a receive must name the sender's length exactly.
//
// The nccl.* options set NCCL's environment variables of the same names
// before the first NCCL call in the rank's process; NCCL reads most of
// them once per process, so a configuration is a fresh job.
package nccl
