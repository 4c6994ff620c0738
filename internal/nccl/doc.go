// Package nccl loads NCCL's library (libnccl.so.2) at run time through
// purego, without cgo or NCCL's headers, and calls the entry points
// gotune uses. Load finds the library through GOTUNE_LIBNCCL, the
// dynamic loader's cache, or the Python wheel PyTorch installs
// (nvidia/nccl/lib or nvidia/cu13/lib under a site-packages directory);
// where none loads, or it is older than 2.23, its error matches
// sys.ErrNotSupported and says why.
//
// Communicators are created with ncclCommInitRankScalable, which takes
// the unique id by pointer: the 128-byte id that ncclCommInitRank takes
// by value does not fit purego's stack arguments.
package nccl
