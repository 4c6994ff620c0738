// Package cudaipc is the GPU transport between ranks of one node: the sm
// engine (copy-in/copy-out through shared memory) taught to carry messages
// in GPU memory, with CUDA IPC as its single-copy mechanism.
//
// A send from device memory larger than cudaipc.threshold goes by
// rendezvous: the sender exports its allocation's IPC handle into its table
// in the shared segment (table.go) and publishes the usual RTS; the
// receiver finds the handle there, opens it once (cache: cudaipc.cache
// mappings per rank) and copies straight from the sender's GPU memory into
// its own buffer, device or host, over NVLink when the GPUs are peers.
// The copy runs on a non-blocking stream of the receiver's own, by
// cuMemcpyAsync on a copy engine or, with cudaipc.copy=sm, by a copy kernel
// (copy.ptx) that needs free SMs and so waits beside a kernel that holds
// them all (smcopy.go). The receiver then records one of its interprocess
// events after the copy and answers FIN at once, naming the event; both
// ranks complete when the event does, each polling it (events.go;
// cudaipc.completion=sync answers after cuStreamSynchronize instead;
// cudaipc.completion=flag has the stream write a number into shared memory
// after the copy, which both poll with a load: flag.go).
//
// Smaller device messages, and every message from host memory into device
// memory, are staged through the sm cells and fragments, which are
// registered with the driver so the copies are DMA (memory.go). Staging runs in one of two
// modes: async (cuMemcpyAsync on the non-blocking stream, then a wait on
// that stream alone) or sync (cuMemcpyDtoH/HtoD on the legacy stream), the
// mode that queues behind any kernel on a blocking stream: hazard H4's
// coupling, kept so the tuner can prove it must be rejected.
//
// Host-to-host messages take sm's paths unchanged. Each rank binds one GPU
// (cudaipc.gpus, rank r takes the (r mod n)-th; default: r mod the device
// count) on its own locked thread; the progress thread (sm.progress=thread)
// is refused, since its thread holds no CUDA context.
package cudaipc
