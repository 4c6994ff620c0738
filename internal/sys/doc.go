// Package sys owns every raw system call gotune makes: anonymous and shared
// mappings, memfd segments, cross-memory attach (process_vm_readv/writev),
// CPU affinity, process-group signalling and the ptrace-related process
// attributes that single-copy transports depend on.
//
// No other package imports golang.org/x/sys/unix. Capabilities that the
// running kernel or the process's privileges lack are reported as errors that
// match ErrNotSupported, carrying the reason, so callers and tests can tell
// "not here" apart from "broken".
package sys
