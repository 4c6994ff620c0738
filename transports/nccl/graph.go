package nccl

import (
	"errors"
	"fmt"

	"github.com/gotune/gotune/internal/cuda"
	libnccl "github.com/gotune/gotune/internal/nccl"
	"github.com/gotune/gotune/transports"
)

// CaptureAllReduce records calls allreduces of send into recv (float32
// sums, as Collective's) on the rank's stream into a CUDA graph and
// returns it instantiated, for Replay: what a training step captured with
// CUDA graphs hands NCCL. Nothing runs while it records; what was queued
// before is completed first, since a capture must not wait on it.
func (t *Transport) CaptureAllReduce(send, recv []byte, calls int) (*cuda.GraphExec, error) {
	if err := t.collStart(transports.AllReduce, send, recv); err != nil {
		return nil, err
	}
	for len(t.q.launched) > 0 {
		if err := t.complete(); err != nil {
			return nil, err
		}
	}
	if err := t.stream.BeginCapture(cuda.CaptureRelaxed); err != nil {
		return nil, fmt.Errorf("nccl: capture: %w", err)
	}
	s, r := addrOf(send), addrOf(recv)
	var callErr error
	for range calls {
		if callErr = t.lib.AllReduce(s, r, len(send)/4, libnccl.Float32, libnccl.Sum, t.comm, t.stream.Handle()); callErr != nil {
			break
		}
	}
	g, err := t.stream.EndCapture() // always: the stream stays capturing otherwise
	if err = errors.Join(callErr, err); err != nil {
		t.failed = true
		return nil, errors.Join(fmt.Errorf("nccl: capture %d allreduces: %w", calls, err), g.Destroy())
	}
	exec, err := g.Instantiate()
	if err = errors.Join(err, g.Destroy()); err != nil {
		return nil, errors.Join(fmt.Errorf("nccl: instantiate the captured allreduces: %w", err), exec.Destroy())
	}
	return exec, nil
}

// Replay queues one launch of a graph from CaptureAllReduce on the rank's
// stream, after what is queued before it, and returns a request that Wait
// completes.
func (t *Transport) Replay(exec *cuda.GraphExec) (transports.Request, error) {
	if t.closed {
		return nil, fmt.Errorf("nccl: transport closed")
	}
	if err := t.launch(); err != nil {
		return nil, err
	}
	q := &request{peer: -1}
	if err := t.issue([]*request{q}, func() error { return exec.Launch(t.stream) }); err != nil {
		t.failed = true
		return nil, err
	}
	return q, nil
}
