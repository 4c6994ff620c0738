// Package cma is the cross-memory-attach single-copy transport: the sm
// engine's rendezvous protocol with the payload moved by one
// process_vm_readv (the receiver pulls, the default) or process_vm_writev
// (the sender pushes), split into chunks of at most cma.chunk bytes per
// system call. Messages up to the eager limit still travel inline through the
// sm FIFO, as in Open MPI's vader and MPICH's nemesis.
//
// When ptrace rules forbid the copy (Yama ptrace_scope, a non-dumpable peer,
// a missing CAP_SYS_PTRACE) or the kernel lacks CONFIG_CROSS_MEMORY_ATTACH,
// the errors match transports.ErrNotSupported and say why. Inside a job the
// engine then falls back to copy-in/copy-out for that peer (see the sm
// package); other failures (the peer has exited: ESRCH) fail the message on
// both sides. cma.onerror=ignore drops every copy error instead: hazard H6's
// unsafe variant, for probes only.
package cma
