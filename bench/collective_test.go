package bench

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/cuda"
)

// A collective's buffers and bandwidths follow nccl-tests: the size is the
// whole buffer, rounded to elements, and busbw is algbw times the
// collective's bus factor.
func TestCollectiveBytesAndBandwidth(t *testing.T) {
	for _, c := range []struct {
		p                 Pattern
		size, n           int
		send, recv, moved int
		factor            float64
	}{
		{AllReduce, 1 << 20, 2, 1 << 20, 1 << 20, 1 << 20, 1},
		{AllReduce, 1030, 8, 1028, 1028, 1028, 1.75},
		{AllGather, 1 << 20, 4, 1 << 18, 1 << 20, 1 << 20, 0.75},
		{AllGather, 10, 4, 2, 8, 8, 0.75},
		{ReduceScatter, 1 << 20, 4, 1 << 20, 1 << 18, 1 << 20, 0.75},
		{ReduceScatter, 24, 4, 16, 4, 16, 0.75},
		{Broadcast, 777, 3, 777, 777, 777, 1},
	} {
		s, r, m := collBytes(c.p, c.size, c.n)
		if s != c.send || r != c.recv || m != c.moved || busFactor(c.p, c.n) != c.factor {
			t.Errorf("%s %d at %d ranks: send %d recv %d moved %d factor %v; want %d %d %d %v",
				c.p, c.size, c.n, s, r, m, busFactor(c.p, c.n), c.send, c.recv, c.moved, c.factor)
		}
	}
	p := Point{Size: 1 << 20, Median: 10} // µs
	collBandwidth(&p, AllReduce, 4)
	if math.Abs(p.AlgBW-104.8576) > 1e-9 || math.Abs(p.BusBW-157.2864) > 1e-9 {
		t.Errorf("1 MiB allreduce in 10 µs at 4 ranks: algbw %v busbw %v, want 104.8576 and 157.2864 GB/s", p.AlgBW, p.BusBW)
	}
}

// Collectives need a transport that runs them and sizes that give every
// rank an element; their OSU and MPI names read as nccl-tests'; with nccl
// and no --mem the buffers are device memory.
func TestCollectiveSpecs(t *testing.T) {
	for alias, want := range map[string]Pattern{"allreduce": AllReduce, "bcast": Broadcast, "all_gather": AllGather, "reducescatter": ReduceScatter} {
		if p, err := ParsePattern(alias); err != nil || p != want {
			t.Errorf("ParsePattern(%q) = %q, %v; want %q", alias, p, err, want)
		}
	}
	for _, c := range []struct {
		spec Spec
		err  string
	}{
		{Spec{Transport: "sm", Pattern: AllReduce, Sizes: []int{1024}}, "transport sm runs no collectives (transports that do: [nccl])"},
		{Spec{Transport: "nccl", Pattern: ReduceScatter, Ranks: 4, Sizes: []int{8}}, "8 bytes is too small for reduce_scatter at 4 ranks (want at least 16)"},
	} {
		if err := c.spec.Normalize(); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: %v, want an error containing %q", c.spec, err, c.err)
		}
	}
	s := Spec{Transport: "nccl", Pattern: AllReduce, Ranks: 2, Sizes: []int{4, 1 << 20}}
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	if len(s.Mem) != 2 || s.Mem[0] != cuda.MemDevice || s.Mem[1] != cuda.MemDevice {
		t.Errorf("nccl all_reduce without --mem: buffers %v, want device on both ranks", s.Mem)
	}
}

// What a validated collective expects is what the collective computes
// from the ranks' sends: each collective done here on the host, at 3
// ranks, for two iterations, against collWant of every rank.
func TestCollectiveValidationData(t *testing.T) {
	const n, size = 3, 3 * 4 * 100
	for _, p := range CollectivePatterns {
		for i := range 2 {
			snd, rcv, _ := collBytes(p, size, n)
			sends := make([][]byte, n)
			for r := range n {
				sends[r] = make([]byte, snd)
				(&loop{pattern: p, rank: r, ranks: n}).collSend(sends[r], i)
			}
			for r := range n {
				got := make([]byte, rcv)
				switch p {
				case AllReduce, ReduceScatter:
					off := 0
					if p == ReduceScatter {
						off = r * rcv
					}
					for e := range rcv / 4 {
						var sum float32
						for q := range n {
							sum += math.Float32frombits(binary.LittleEndian.Uint32(sends[q][off+4*e:]))
						}
						binary.LittleEndian.PutUint32(got[4*e:], math.Float32bits(sum))
					}
				case AllGather:
					for q := range n {
						copy(got[q*snd:], sends[q])
					}
				case Broadcast:
					copy(got, sends[0])
				}
				want := make([]byte, rcv)
				(&loop{pattern: p, rank: r, ranks: n}).collWant(want, i)
				if !bytes.Equal(got, want) {
					t.Errorf("%s iteration %d rank %d: the collective's result differs from collWant's", p, i, r)
				}
			}
		}
	}
}
