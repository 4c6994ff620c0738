// Package cuda owns gotune's use of the CUDA driver API (libcuda.so.1). It
// loads the driver at run time through dlopen (github.com/ebitengine/purego),
// so gotune builds and runs without cgo, the CUDA toolkit or a GPU; nothing
// else in gotune calls the driver.
//
// What it owns:
//   - loading the driver once (Load, lazily on first use) and cuInit; when the
//     library is absent or there is no device, every entry point returns an
//     error matching ErrNotSupported (errors.Is) that says why;
//   - errors: every failed call returns an *Error carrying the CUresult, the
//     driver's name and text for it and the operation
//     ("cuMemAlloc 1 GiB: CUDA_ERROR_OUT_OF_MEMORY: out of memory"), matched
//     with errors.Is against ErrNotReady, ErrOutOfMemory, ...;
//   - devices and contexts (Open, Device.Bind): the device's primary context,
//     shared with every other library in the process, made current on one
//     locked OS thread at a time;
//   - memory of every kind a benchmark moves (MemKind: pageable host, pinned
//     host, device, managed with a placement advice, stream-ordered pool),
//     host registration and pointer attributes;
//   - streams, events, synchronous and asynchronous copies, peer access;
//   - CUDA IPC handles for memory and events, as [64]byte values that can
//     travel over a socket;
//   - modules, kernel launch and the occupancy query.
//
// # Threads
//
// The driver keeps the current context per OS thread. A goroutine that uses
// a Device calls runtime.LockOSThread and then Device.Bind before anything
// else; every method that says "in the bound context" relies on it.
//
// # Hot paths
//
// Copies, memsets, event record and query, stream query and kernel launch
// allocate nothing on success: they pass integers straight to
// purego.SyscallN. Only failures build an *Error.
//
// # The synchronous copies (hazard H4)
//
// Copy, CopyHtoD, CopyDtoH, CopyDtoD and Memset run on the legacy default
// stream, which waits for every blocking stream of the context: a kernel on a
// blocking stream that spins until the copied message arrives never sees it.
// They are kept on purpose, as the hazardous path the safety phase probes;
// transports use the stream-ordered forms (CopyAsync on a non-blocking
// stream).
//
// # Passing structs by value (the x86-64 System V ABI)
//
// Three driver functions take a struct by value. purego v0.11.3 can pass
// structs by value on linux/amd64, but only through RegisterFunc, which
// reflects and allocates on every call; this package uses SyscallN for every
// call and places the struct's words itself, following the System V rules:
//   - cuIpcOpenMemHandle_v2(CUdeviceptr*, CUipcMemHandle, unsigned) and
//     cuIpcOpenEventHandle(CUevent*, CUipcEventHandle): a 64-byte struct is
//     larger than two eightbytes, so it is of class MEMORY: it is copied onto
//     the stack in argument order and takes no integer register. The
//     integer arguments (the out-pointer, the flags) fill RDI, RSI, ...; the
//     unused integer registers up to the sixth are padded with zeros, so the
//     struct's eight words are SyscallN's arguments 7 to 14, which purego
//     stores at 0(SP)..56(SP) of the callee's frame: exactly where the
//     callee looks for a MEMORY argument.
//   - cuMemAdvise_v2(CUdeviceptr, size_t, CUmem_advise, CUmemLocation):
//     CUmemLocation is {int type; int id}, eight bytes of integers, one
//     eightbyte of class INTEGER: it travels in the next integer register
//     (RCX), type in the low 32 bits and id in the high 32 bits.
//
// CUresult is a 32-bit enum returned in EAX; the upper half of RAX is
// undefined, so results are truncated to 32 bits before use.
package cuda
