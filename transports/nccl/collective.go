package nccl

import (
	"fmt"
	"unsafe"

	"github.com/gotune/gotune/internal/cuda"
	libnccl "github.com/gotune/gotune/internal/nccl"
	"github.com/gotune/gotune/transports"
)

// Collective queues one NCCL collective on the rank's stream, after
// whatever point-to-point work is queued before it, and returns a request
// that Wait completes. Its buffers must be GPU-addressable: a collective
// is not staged.
func (t *Transport) Collective(op transports.CollOp, send, recv []byte, root int) (transports.Request, error) {
	if err := t.collStart(op, send, recv); err != nil {
		return nil, err
	}
	s, r := addrOf(send), addrOf(recv)
	stream := t.stream.Handle()
	var call func() error
	switch op {
	case transports.AllReduce:
		call = func() error {
			return t.lib.AllReduce(s, r, len(send)/4, libnccl.Float32, libnccl.Sum, t.comm, stream)
		}
	case transports.Broadcast:
		call = func() error { return t.lib.Broadcast(s, r, len(send), libnccl.Int8, root, t.comm, stream) }
	case transports.AllGather:
		call = func() error { return t.lib.AllGather(s, r, len(send), libnccl.Int8, t.comm, stream) }
	case transports.ReduceScatter:
		call = func() error {
			return t.lib.ReduceScatter(s, r, len(recv)/4, libnccl.Float32, libnccl.Sum, t.comm, stream)
		}
	default:
		return nil, fmt.Errorf("nccl: unknown collective %q", op)
	}
	q := &request{peer: -1, buf: recv}
	if err := t.issue([]*request{q}, call); err != nil {
		t.failed = true
		return nil, err
	}
	return q, nil
}

// collStart readies a collective op of send into recv: the transport
// open, point-to-point work queued before it launched, the buffers' lengths
// as the contract says and GPU-addressable.
func (t *Transport) collStart(op transports.CollOp, send, recv []byte) error {
	if t.closed {
		return fmt.Errorf("nccl: transport closed")
	}
	if err := t.launch(); err != nil {
		return err
	}
	if err := t.collLengths(op, len(send), len(recv)); err != nil {
		return err
	}
	for _, b := range [][]byte{send, recv} {
		if err := gpuAddressable(b); err != nil {
			return fmt.Errorf("nccl: %s: %w", op, err)
		}
	}
	return nil
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// gpuAddressable refuses pageable host memory, which NCCL's kernels
// cannot read.
func gpuAddressable(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	info, err := cuda.PointerAttributes(addrOf(b))
	if err != nil {
		return fmt.Errorf("classify a %d-byte buffer: %w", len(b), err)
	}
	if info.Type == cuda.MemoryUnregistered {
		return fmt.Errorf("a %d-byte buffer in pageable host memory: collectives take device, pinned or managed memory", len(b))
	}
	return nil
}

// collLengths checks a collective's buffer lengths against the contract
// of transports.Collectives: NCCL would read or write past a short one.
func (t *Transport) collLengths(op transports.CollOp, send, recv int) error {
	var ok bool
	switch op {
	case transports.AllReduce:
		ok = send == recv && send%4 == 0
	case transports.Broadcast:
		ok = send == recv
	case transports.AllGather:
		ok = recv == t.size*send
	case transports.ReduceScatter:
		ok = send == t.size*recv && recv%4 == 0
	default:
		return fmt.Errorf("nccl: unknown collective %q", op)
	}
	if !ok {
		return fmt.Errorf("nccl: %s of %d send and %d receive bytes at %d ranks: lengths off the collective's contract (transports.Collectives)", op, send, recv, t.size)
	}
	return nil
}
