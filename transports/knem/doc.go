// Package knem is the KNEM single-copy transport: the sm engine's
// rendezvous with the payload moved by one ioctl of the knem module
// (/dev/knem, ABI 0xd). The side whose buffer the peer reaches declares it
// a region (read-only for a pulling receiver, writable for a pushing
// sender); the region's cookie travels in the rendezvous control message
// (sm.Exporter) and the peer copies through it with an inline copy. Regions
// are single-use (knem.regions=single: one per message, gone after the
// copy) or cached per buffer (knem.regions=cached: reused, destroyed when
// the allocator's release hook reaches Invalidate, because a region keeps
// the pages it pinned). knem.dma offloads copies onto a DMA engine where
// the driver reports one.
//
// A missing device, an unsupported ABI and a node this user may not open
// match transports.ErrNotSupported and say which (Probe: what doctor and
// selftest report). knem.device=fake selects a stand-in for tests that
// keeps the cookie contract and copies with process_vm_readv/writev.
package knem
