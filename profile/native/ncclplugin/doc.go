// Package ncclplugin owns libnccl-tuner-gotune, the small C tuner plugin
// NCCL loads to apply a tuned profile's per-collective choices (algorithm,
// protocol, channels by size range and communicator size), and the table
// it reads. The plugin's source is embedded and built with the node's C
// compiler; a C library, not a Go c-shared one, because a second Go
// runtime inside a Go host (gotune itself, through purego) is unsupported.
package ncclplugin
