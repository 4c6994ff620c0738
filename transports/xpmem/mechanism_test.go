package xpmem

import (
	"os"
	"testing"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// auto finds xpmem by name and builds it routed by its ranges, closable
// and taking invalidations.
func TestRoutedMechanism(t *testing.T) {
	m, ok := sm.LookupMechanism("xpmem")
	if !ok {
		t.Fatal("xpmem is not registered as a single-copy mechanism")
	}
	env := transports.Env{Size: 1, PIDs: []int{os.Getpid()}, Options: transports.Options{KeyDevice: Fake}}
	s, err := m.Routed(env, func(n int) bool { return n >= 1<<20 })
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != "xpmem" || !s.Pull() || s.Rendezvous(1<<20-1) || !s.Rendezvous(1<<20) {
		t.Errorf("%s: pull %v, rendezvous below/at 1 MiB %v/%v", s.Name(), s.Pull(), s.Rendezvous(1<<20-1), s.Rendezvous(1<<20))
	}
	inv, ok := s.(transports.Invalidator)
	if !ok {
		t.Fatal("no Invalidate")
	}
	inv.Invalidate(0x10000, 4096)
	if err := s.(interface{ Close() error }).Close(); err != nil {
		t.Error(err)
	}
}
