package bench

import (
	"fmt"
	"slices"

	"github.com/gotune/gotune/transports"
)

// The collectives run whole by the transport (transports.Collectives), as
// nccl-tests runs them: every rank calls the collective once per
// iteration and waits for it, lined up with the others before each timed
// pass; the time per call is averaged over the ranks, with the fastest
// and slowest rank's beside it (as OSU's collectives print them). A size
// is the bytes of the collective's whole buffer (nccl-tests' "size"):
// allreduce and broadcast move size bytes on every rank, allgather
// gathers size/N from each rank, reducescatter reduces size into size/N on
// each. Reductions sum 32-bit floats; broadcast's root is rank 0.

// collectiveAliases are the collectives' names without nccl-tests'
// underscores, as OSU and MPI spell them.
var collectiveAliases = map[string]Pattern{"allreduce": AllReduce, "allgather": AllGather,
	"reducescatter": ReduceScatter, "reduce_scatter_block": ReduceScatter, "bcast": Broadcast}

// collOp is the transport's name of a collective pattern.
func collOp(p Pattern) transports.CollOp {
	switch p {
	case AllReduce:
		return transports.AllReduce
	case AllGather:
		return transports.AllGather
	case ReduceScatter:
		return transports.ReduceScatter
	}
	return transports.Broadcast
}

// Collective reports whether p is run whole by the transport.
func (p Pattern) Collective() bool { return slices.Contains(CollectivePatterns, p) }

// collBytes are a collective's send and receive lengths for a size of
// size bytes at n ranks, and the bytes its buffer holds (nccl-tests'
// size, rounded down to whole elements); zero lengths where size is too
// small to give each rank one element.
func collBytes(p Pattern, size, n int) (send, recv, moved int) {
	switch p {
	case AllReduce:
		c := size / 4 * 4
		return c, c, c
	case AllGather:
		per := size / n
		return per, per * n, per * n
	case ReduceScatter:
		per := size / (4 * n) * 4
		return per * n, per, per * n
	}
	return size, size, size
}

// busFactor is what nccl-tests multiplies a collective's algorithm
// bandwidth by to give the bandwidth of each rank's links.
func busFactor(p Pattern, n int) float64 {
	switch p {
	case AllReduce:
		return 2 * float64(n-1) / float64(n)
	case AllGather, ReduceScatter:
		return float64(n-1) / float64(n)
	}
	return 1
}

// normalizeCollective checks a collective's spec: a transport that runs
// collectives, and sizes that give every rank an element.
func (s *Spec) normalizeCollective() error {
	d, err := transports.Lookup(s.Transport)
	if err != nil {
		return err
	}
	if !d.Collectives {
		var have []string
		for _, n := range transports.Names() {
			if x, err := transports.Lookup(n); err == nil && x.Collectives {
				have = append(have, n)
			}
		}
		return fmt.Errorf("--pattern %s: transport %s runs no collectives (transports that do: %v)", s.Pattern, s.Transport, have)
	}
	if s.Validate {
		return fmt.Errorf("--pattern %s: --validate is not supported for collectives yet", s.Pattern)
	}
	n := s.RankCount()
	for _, size := range s.Sizes {
		if snd, rcv, _ := collBytes(s.Pattern, size, n); snd == 0 || rcv == 0 {
			return fmt.Errorf("--sizes: %d bytes is too small for %s at %d ranks (want at least %d)", size, s.Pattern, n, minCollSize(s.Pattern, n))
		}
	}
	return nil
}

// minCollSize is the smallest size that gives every rank an element.
func minCollSize(p Pattern, n int) int {
	for size := 1; ; size++ {
		if snd, rcv, _ := collBytes(p, size, n); snd > 0 && rcv > 0 {
			return size
		}
	}
}

// collective is one iteration of a collective pattern: the call, then the
// wait for it.
func (l *loop) collective() error {
	c, ok := l.t.(transports.Collectives)
	if !ok {
		return fmt.Errorf("transport %s runs no collectives", l.t.Name())
	}
	snd, rcv, _ := collBytes(l.pattern, l.size, l.ranks)
	send := l.sbuf[0][:cap(l.sbuf[0])][:snd]
	recv := l.rbuf[0][:cap(l.rbuf[0])][:rcv]
	q, err := c.Collective(collOp(l.pattern), send, recv, 0)
	if err != nil {
		return err
	}
	return l.t.Wait(q)
}

// collBandwidth sets a collective point's algorithm and bus bandwidth
// from its median time.
func collBandwidth(p *Point, pattern Pattern, n int) {
	_, _, moved := collBytes(pattern, p.Size, n)
	if p.Median <= 0 {
		return
	}
	p.AlgBW = float64(moved) / (p.Median * 1e3) // bytes per ns = GB/s
	p.BusBW = p.AlgBW * busFactor(pattern, n)
}

// collMetric is what nccl-tests calls the series a collective pattern
// measures: the out-of-place time of float data (summed where the
// collective reduces; broadcast from root 0), so that gotune compare pools
// a gotune run with an imported nccl-tests run of the same collective.
// Allgather and broadcast move bytes, which float data moves alike.
func collMetric(p Pattern) string {
	switch p {
	case AllReduce, ReduceScatter:
		return "float/sum out-of-place time"
	case Broadcast:
		return "float/none root 0 out-of-place time"
	}
	return "float/none out-of-place time"
}
