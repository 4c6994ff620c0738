// Package verbs owns gotune's use of libibverbs: the library is opened at
// run time (dlopen of libibverbs.so.1) and called through small C shims, so
// a gotune binary built here starts on machines without rdma-core and says
// why InfiniBand is absent (an error matching sys.ErrNotSupported naming
// the missing library or device). Building needs libibverbs-dev's headers
// only; no libibverbs symbol is linked. The header's inline functions
// (post send and receive, poll, notify) are called from the shims through
// the context's ops table, as the header's own inlines do.
//
// It offers what transports/ib needs: devices, ports, GIDs, protection
// domains, memory regions, completion queues and channels, and RC queue
// pairs; and discovery as ibv_devinfo shows it (state, MTU, LID, every GID
// with its RoCE type from sysfs, the GID index chosen), which gotune
// doctor prints (Report).
package verbs
