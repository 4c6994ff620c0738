package stack

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/nccl"
)

// Every value of the NCCL space, with what it needs, becomes options the
// nccl transport takes and NCCL runs with; the chunk never exceeds an
// eighth of the buffer it is set with; "auto" sets nothing.
func TestNCCLSpaceIsSettable(t *testing.T) {
	var n NCCL
	for _, p := range n.Space() {
		for _, v := range p.Values {
			params := map[string]string{}
			p.set(params, v)
			o, err := ncclOptions(params)
			if err != nil {
				t.Errorf("%s=%s: %v", p.Name, v, err)
				continue
			}
			if v == ncclDefault && len(o) != 0 {
				t.Errorf("%s=auto set %v, want nothing", p.Name, o)
			}
			if b, ok := o[optionOf("NCCL_BUFFSIZE")]; ok {
				if c, ok := o[optionOf("NCCL_P2P_NVL_CHUNKSIZE")]; ok && chunkTooBig(b, c) {
					t.Errorf("buffsize %s with chunk %s: above an eighth of the buffer", b, c)
				}
			}
		}
	}
	if _, err := ncclOptions(map[string]string{"socket_ifname": "eth0"}); err == nil || !strings.Contains(err.Error(), "NCCL_SOCKET_IFNAME") {
		t.Errorf("a parameter the transport does not set: %v", err)
	}
	if _, err := ncclOptions(map[string]string{"ll128_buffsize": "131072"}); err == nil || !strings.Contains(err.Error(), "NVIDIA/nccl#1739") {
		t.Errorf("an LL128 buffer off its steps: %v", err)
	}
}

// optionOf is the nccl transport's option for NCCL's variable env.
func optionOf(env string) string {
	k, _ := nccl.OptionFor(env)
	return k
}

func chunkTooBig(buff, chunk string) bool {
	var b, c int
	fmt.Sscan(buff, &b)
	fmt.Sscan(chunk, &c)
	return c > b/8
}

// A contender's run is the nccl transport with its options: a pair for
// point-to-point, two ranks for a collective, device buffers.
func TestNCCLSpec(t *testing.T) {
	s, err := ncclSpec(bench.Spec{Transport: "sm", Pattern: bench.AllReduce, Sizes: []int{1 << 20}, CPUs: []int{1, 2}},
		map[string]string{"proto": "^LL128", "nthreads": ncclDefault, "buffsize": "8388608", "p2p_nvl_chunksize": "1048576"})
	if err != nil {
		t.Fatal(err)
	}
	want := transports.Options{optionOf("NCCL_PROTO"): "^LL128", optionOf("NCCL_BUFFSIZE"): "8388608", optionOf("NCCL_P2P_NVL_CHUNKSIZE"): "1048576"}
	if s.Transport != "nccl" || s.Ranks != 2 || s.CPUs != nil || !maps.Equal(s.Options, want) {
		t.Errorf("spec %+v; want nccl, 2 ranks, no CPU list, options %v", s, want)
	}
	if err := s.Normalize(); err != nil {
		t.Fatalf("the contender's spec does not normalize: %v", err)
	}
}

// Without NCCL and two GPUs the stack is absent, not failing.
func TestNCCLPrepareWithoutNCCL(t *testing.T) {
	var n NCCL
	err := n.Prepare(context.Background(), t.TempDir())
	if err == nil {
		t.Skip("NCCL and two GPUs are here")
	}
	if !errors.Is(err, sys.ErrNotSupported) {
		t.Errorf("got %v, want an error matching ErrNotSupported", err)
	}
}

// A failed check run is sorted into the stack hazards.
func TestNCCLHazards(t *testing.T) {
	for _, c := range []struct {
		err  error
		want error
	}{
		{errors.New("rank 1: payload validation failed: size 4096 iteration 3 message 0 byte 7: got 0x11, want 0xee"), mpistack.ErrCorrupt},
		{&launch.StallError{Kind: "bench", Ranks: []int{0, 1}}, mpistack.ErrHang},
		{fmt.Errorf("launch: %w", context.DeadlineExceeded), mpistack.ErrHang},
		{errors.New("rank 0: ncclCommInitRankScalable: NCCL error 3 (internal error)"), mpistack.ErrCrash},
	} {
		if got := ncclHazard(bench.Bandwidth, c.err); !errors.Is(got, c.want) {
			t.Errorf("%v: sorted as %v, want %v", c.err, got, c.want)
		}
	}
}
