package testutil

import (
	"runtime"
	"testing"
)

// PingPong times b.N round trips between two goroutines, after warm
// untimed ones: first starts each trip and waits for its reply, second
// replies. With pin, each goroutine locks itself to its thread and pins
// it, pin(0) the benchmark's own (first) and pin(1) the other, and stays
// locked, so that the runtime discards those threads with their affinity
// when the goroutines end (pin is sys.PinThread to a CPU each: testutil
// may not import sys, whose tests import testutil). It returns the time
// one way, half a round trip, in ns.
func PingPong(b *testing.B, pin func(side int) error, warm int, first, second func() error) float64 {
	b.Helper()
	done := make(chan error, 1)
	go func() {
		if pin != nil {
			runtime.LockOSThread()
			if err := pin(1); err != nil {
				done <- err
				return
			}
		}
		for range warm + b.N {
			if err := second(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if pin != nil {
		runtime.LockOSThread()
		if err := pin(0); err != nil {
			b.Fatal(err)
		}
	}
	for i := range warm + b.N {
		if i == warm {
			b.ResetTimer()
		}
		if err := first(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return float64(b.Elapsed().Nanoseconds()) / float64(2*b.N)
}

// Endpoint is what PairPingPong needs of a transport's rank.
type Endpoint interface {
	Send(to int, buf []byte) error
	Recv(from int, buf []byte) (int, error)
}

// PairPingPong is PingPong of blocking messages between rank 0 (a, the
// buffer sa) and rank 1 (c, sc) of one transport.
func PairPingPong(b *testing.B, pin func(side int) error, warm int, a, c Endpoint, sa, sc []byte) float64 {
	b.Helper()
	return PingPong(b, pin, warm, func() error {
		if err := a.Send(1, sa); err != nil {
			return err
		}
		_, err := a.Recv(1, sa)
		return err
	}, func() error {
		if _, err := c.Recv(0, sc); err != nil {
			return err
		}
		return c.Send(0, sc)
	})
}
