package bench

import (
	"encoding/binary"
	"fmt"
	"math"
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

// collective is iteration i of a collective pattern: the call, then the
// wait for it; validated, the send data is iteration i's and every byte
// of the result is checked.
func (l *loop) collective(i int) error {
	c, ok := l.t.(transports.Collectives)
	if !ok {
		return fmt.Errorf("transport %s runs no collectives", l.t.Name())
	}
	snd, rcv, _ := collBytes(l.pattern, l.size, l.ranks)
	send := l.sbuf[0][:cap(l.sbuf[0])][:snd]
	recv := l.rbuf[0][:cap(l.rbuf[0])][:rcv]
	if l.validate {
		if err := l.collPut(send, i); err != nil {
			return err
		}
	}
	q, err := c.Collective(collOp(l.pattern), send, recv, 0)
	if err != nil {
		return err
	}
	if err := l.t.Wait(q); err != nil || !l.validate {
		return err
	}
	return l.collCheck(recv, i)
}

// Validated collectives. The reductions carry 32-bit floats whose sums are
// exact (whole numbers below 2^24): element e of rank r's send in
// iteration i is (r+1)(e mod 251 + 1) + i mod 13. Allgather and broadcast
// carry bytes: rank r's send in iteration i is the byte pattern of
// (i, r), and broadcast's root is rank 0.

// collValue is element e of rank r's send in iteration i.
func collValue(r, i, e int) float32 { return float32((r+1)*(e%251+1) + i%13) }

// collSum is element e of the sum over n ranks in iteration i.
func collSum(n, i, e int) float32 { return float32(n*(n+1)/2*(e%251+1) + n*(i%13)) }

// collSend writes this rank's send data for iteration i into b.
func (l *loop) collSend(b []byte, i int) {
	if l.pattern == AllReduce || l.pattern == ReduceScatter {
		for e := range len(b) / 4 {
			binary.LittleEndian.PutUint32(b[4*e:], math.Float32bits(collValue(l.rank, i, e)))
		}
		return
	}
	putPattern(b, patternBase(i, l.rank, 0))
}

// collWant writes what this rank's receive must hold after iteration i.
func (l *loop) collWant(b []byte, i int) {
	n := l.ranks
	switch l.pattern {
	case AllReduce:
		for e := range len(b) / 4 {
			binary.LittleEndian.PutUint32(b[4*e:], math.Float32bits(collSum(n, i, e)))
		}
	case ReduceScatter:
		first := l.rank * len(b) / 4 // this rank's block of the reduced elements
		for e := range len(b) / 4 {
			binary.LittleEndian.PutUint32(b[4*e:], math.Float32bits(collSum(n, i, first+e)))
		}
	case AllGather:
		per := len(b) / n
		for r := range n {
			putPattern(b[r*per:(r+1)*per], patternBase(i, r, 0))
		}
	default: // broadcast from rank 0
		putPattern(b, patternBase(i, 0, 0))
	}
}

// collPut writes iteration i's send data into b, through host scratch
// when b is device memory.
func (l *loop) collPut(b []byte, i int) error {
	if l.stage == nil {
		l.collSend(b, i)
		return nil
	}
	h := l.stage.host[:len(b)]
	l.collSend(h, i)
	return l.stage.copy(b, h)
}

// collCheck compares recv with what iteration i must leave there.
func (l *loop) collCheck(recv []byte, i int) error {
	got := recv
	if l.stage != nil {
		got = l.stage.host[:len(recv)]
		if err := l.stage.copy(got, recv); err != nil {
			return err
		}
	}
	if cap(l.want) < len(recv) {
		l.want = make([]byte, len(recv))
	}
	want := l.want[:len(recv)]
	l.collWant(want, i)
	for k := range got {
		if got[k] != want[k] {
			return &ValidationError{Size: l.size, Iteration: i, Offset: k, Got: got[k], Want: want[k]}
		}
	}
	return nil
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
