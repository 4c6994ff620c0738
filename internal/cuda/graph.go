package cuda

import (
	"fmt"
	"unsafe"
)

// CaptureMode is CUstreamCaptureMode: how a capture treats calls of other
// threads that are unsafe during it.
type CaptureMode uint32

const (
	CaptureGlobal      CaptureMode = 0
	CaptureThreadLocal CaptureMode = 1
	CaptureRelaxed     CaptureMode = 2 // no check: what NCCL's own users capture with
)

// Graph is a CUgraph recorded from a stream; GraphExec is one instantiated
// for launch.
type (
	Graph     struct{ h uintptr }
	GraphExec struct{ h uintptr }
)

// needGraphs fails where the driver lacks the capture and graph entry
// points (before CUDA 11.4) with ErrNotSupported.
func needGraphs() error {
	if err := Load(); err != nil {
		return err
	}
	if table.cuStreamBeginCapture == 0 || table.cuStreamEndCapture == 0 || table.cuGraphInstantiate == 0 ||
		table.cuGraphLaunch == 0 || table.cuGraphExecDestroy == 0 || table.cuGraphDestroy == 0 {
		return fmt.Errorf("%w: the driver has no stream capture and graph launch (CUDA 11.4+)", ErrNotSupported)
	}
	return nil
}

// BeginCapture starts recording s: work queued on it until EndCapture is
// recorded into a graph instead of run. s must be a stream of its own, not
// the legacy one.
func (s *Stream) BeginCapture(mode CaptureMode) error {
	if err := needGraphs(); err != nil {
		return err
	}
	return invoke(&table.cuStreamBeginCapture, "cuStreamBeginCapture", s.handle(), uintptr(mode))
}

// EndCapture ends the recording BeginCapture started on s and returns the
// graph recorded.
func (s *Stream) EndCapture() (*Graph, error) {
	if err := needGraphs(); err != nil {
		return nil, err
	}
	var h uintptr
	if err := invokeOut(&table.cuStreamEndCapture, "cuStreamEndCapture", s.handle(), uintptr(unsafe.Pointer(&h))); err != nil {
		return nil, err
	}
	return &Graph{h: h}, nil
}

// Instantiate makes g launchable.
func (g *Graph) Instantiate() (*GraphExec, error) {
	if err := needGraphs(); err != nil {
		return nil, err
	}
	var h uintptr
	if err := invokeOut(&table.cuGraphInstantiate, "cuGraphInstantiateWithFlags", uintptr(unsafe.Pointer(&h)), g.h, 0); err != nil {
		return nil, err
	}
	return &GraphExec{h: h}, nil
}

// Launch queues one run of the whole graph on s.
func (e *GraphExec) Launch(s *Stream) error {
	if err := needGraphs(); err != nil {
		return err
	}
	return invoke(&table.cuGraphLaunch, "cuGraphLaunch", e.h, s.handle())
}

// Destroy frees the instantiated graph; a second call does nothing.
func (e *GraphExec) Destroy() error {
	if e == nil || e.h == 0 {
		return nil
	}
	return release(&e.h, &table.cuGraphExecDestroy, "cuGraphExecDestroy")
}

// Destroy frees the graph; a second call does nothing.
func (g *Graph) Destroy() error {
	if g == nil || g.h == 0 {
		return nil
	}
	return release(&g.h, &table.cuGraphDestroy, "cuGraphDestroy")
}
