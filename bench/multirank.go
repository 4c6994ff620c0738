package bench

import (
	"fmt"
	"slices"

	"github.com/gotune/gotune/transports"
)

// The multi-rank patterns run Spec.Ranks ranks at once, as OSU's
// multi-pair benchmarks do:
//
//   - mbw_mr (osu_mbw_mr): rank i < N/2 streams windows to rank i+N/2, all
//     pairs at once; the aggregate MB/s and messages/s of all pairs, over
//     the time of the slowest sender.
//   - multi_lat (osu_multi_lat): the same pairs ping-pong; the one-way
//     latency averaged over the pairs.
//   - incast: ranks 1..N-1 stream windows to rank 0, which posts the
//     receives of every sender's window before it waits; the aggregate
//     MB/s and messages/s at rank 0.
//   - alltoall: the communication of osu_alltoall: rank r sends to
//     (r+k) mod N and receives from (r-k) mod N for k = 1..N-1, all at
//     once up to AllToAllScatter bytes, step by step above (exchangeAll);
//     the time per whole exchange, averaged over the ranks, with the
//     fastest and slowest rank's beside it.
//
// Every rank times its own passes, each lined up with all the others at a
// barrier, and returns the raw times (rankTimes); Run combines them.

// MultiRank reports whether p is a pattern of Spec.Ranks ranks.
func (p Pattern) MultiRank() bool { return slices.Contains(MultiPatterns, p) || p.Collective() }

// windowed reports whether p keeps a window of messages in flight.
func (p Pattern) windowed() bool {
	return p != Latency && p != MultiLatency && p != AllToAll && !p.Collective()
}

// paired reports whether p pairs rank i with rank i+N/2.
func (p Pattern) paired() bool { return p == MultiBandwidth || p == MultiLatency }

// RankCount is the number of ranks the spec runs (Ranks, 2 when unset).
func (s Spec) RankCount() int {
	if s.Ranks == 0 {
		return 2
	}
	return s.Ranks
}

// partner is rank's peer and whether it leads their exchanges (sends
// first and times them). A pair: rank 0 leads rank 1. mbw_mr, multi_lat:
// rank i < N/2 leads rank i+N/2. incast: every sender leads rank 0.
// alltoall has no single peer.
func (s Spec) partner(rank int) (peer int, lead bool) {
	n := s.RankCount()
	switch {
	case s.Pattern.paired() && rank < n/2:
		return rank + n/2, true
	case s.Pattern.paired():
		return rank - n/2, false
	case s.Pattern == Incast:
		return 0, rank != 0
	case s.Pattern == AllToAll || s.Pattern.Collective():
		return -1, false
	}
	return 1 - rank, rank == 0
}

// bufferSlots is how many send and receive buffers rank cycles through:
// Spec.Buffers; else one each, or under Validate one per message in
// flight (incast's rank 0 receives a window from every sender at once).
func (s Spec) bufferSlots(rank int) (send, recv int) {
	switch {
	case s.Buffers > 0:
		return s.Buffers, s.Buffers
	case !s.Validate || !s.Pattern.windowed():
		return 1, 1
	case s.Pattern == Incast && rank == 0:
		return 1, s.inFlight()
	}
	return max(s.Window, 1), max(s.Window, 1)
}

// inFlight is how many messages the busiest receiver has posted at once.
func (s Spec) inFlight() int {
	w := max(s.Window, 1)
	if s.Pattern == Incast {
		return w * (s.RankCount() - 1)
	}
	return w
}

// maxValidatedIncast bounds incast rank 0's receive buffers under
// Validate, where each message in flight needs a buffer of its own.
const maxValidatedIncast = 8 << 30

// normalizeRanks checks Ranks against the pattern and what the
// multi-rank patterns support, naming the flags.
func (s *Spec) normalizeRanks() error {
	n := s.RankCount()
	switch {
	case n < 2:
		return fmt.Errorf("--ranks %d: need at least 2", s.Ranks)
	case !s.Pattern.MultiRank() && n != 2:
		return fmt.Errorf("--pattern %s measures a pair: --ranks %d needs mbw_mr, multi_lat, incast or alltoall", s.Pattern, n)
	case s.Pattern.paired() && n%2 != 0:
		return fmt.Errorf("--ranks %d: %s pairs rank i with rank i+N/2 and needs an even number of ranks", n, s.Pattern)
	}
	if s.Ranks == 2 {
		s.Ranks = 0
	}
	if !s.Pattern.MultiRank() {
		return nil
	}
	largest := max(slices.Max(s.Sizes), s.Settle)
	if s.Pattern.Collective() {
		if err := s.normalizeCollective(); err != nil {
			return err
		}
	}
	switch {
	case s.UsesGPU() && !s.Pattern.Collective():
		return fmt.Errorf("--pattern %s: the multi-rank patterns measure host memory (no --mem, --gpus or --kernel)", s.Pattern)
	case s.InterNode():
		return fmt.Errorf("--pattern %s: the multi-rank patterns run on one node (--nodes 1)", s.Pattern)
	case len(s.CPUs) > 0 && len(s.CPUs) < n:
		return fmt.Errorf("--cpus: %d CPUs for %d ranks (--ranks)", len(s.CPUs), n)
	case s.Validate && s.Buffers > 0 && s.Pattern.windowed() && s.Buffers < s.inFlight():
		return fmt.Errorf("buffers=%d with validate: %s needs at least %d, one per message in flight", s.Buffers, s.Pattern, s.inFlight())
	case s.Validate && s.Pattern == Incast && s.Buffers == 0 && s.inFlight()*largest > maxValidatedIncast:
		return fmt.Errorf("incast with --validate: rank 0 would keep %d receive buffers of %s (--ranks minus 1 times --window): lower --window, --ranks or the largest size",
			s.inFlight(), transports.FormatSize(largest))
	}
	return nil
}

// barrier lines up every rank of the job: each sends rank 0 a zero-byte
// message, and rank 0 answers each once it has heard from all.
func (l *loop) barrier() error {
	z := l.ack[:0]
	if l.rank != 0 {
		if err := l.t.Send(0, z); err != nil {
			return fmt.Errorf("barrier: %w", err)
		}
		if _, err := l.t.Recv(0, z); err != nil {
			return fmt.Errorf("barrier: %w", err)
		}
		return nil
	}
	for r := 1; r < l.ranks; r++ {
		if _, err := l.t.Recv(r, z); err != nil {
			return fmt.Errorf("barrier: rank %d: %w", r, err)
		}
	}
	for r := 1; r < l.ranks; r++ {
		if err := l.t.Send(r, z); err != nil {
			return fmt.Errorf("barrier: rank %d: %w", r, err)
		}
	}
	return nil
}

// incastWindow: every sender streams a window to rank 0 (streamWindow,
// as the pair's lead); rank 0 posts the receives of all the windows,
// waits for them, checks them and acknowledges each sender.
func (l *loop) incastWindow(i int) error {
	if l.rank != 0 {
		return l.streamWindow(i)
	}
	senders := l.ranks - 1
	l.reqs = l.reqs[:0]
	for s := range senders {
		for w := range l.window {
			q, err := l.t.Irecv(s+1, l.incastSlot(i, s, w))
			if err != nil {
				return err
			}
			l.reqs = append(l.reqs, q)
		}
	}
	if err := l.t.Wait(l.reqs...); err != nil {
		return err
	}
	for s := range senders {
		for w := range l.window {
			if err := l.check(l.incastSlot(i, s, w), i, s+1, w); err != nil {
				return fmt.Errorf("from rank %d: %w", s+1, err)
			}
		}
	}
	for s := range senders {
		if err := l.t.Send(s+1, l.ack); err != nil {
			return err
		}
	}
	return nil
}

// incastSlot is rank 0's receive buffer of message w from sender s+1 in
// iteration i: the iteration's messages take the buffers in turn.
func (l *loop) incastSlot(i, s, w int) []byte {
	k := (i*(l.ranks-1)+s)*l.window + w
	return l.rbuf[k%len(l.rbuf)]
}

// AllToAllScatter is the largest alltoall message exchanged scattered:
// every receive and send posted at once (AllToAllThrottle peers at a
// time) and waited for together, as MPICH's medium-message alltoall does
// up to its MPIR_CVAR_ALLTOALL_MEDIUM_MSG_SIZE (32 KiB); larger messages
// go pairwise, one peer at a time, as there. Small messages are what a
// step-by-step exchange pays N-1 handshakes for.
const (
	AllToAllScatter  = 32 << 10
	AllToAllThrottle = 32
)

// scattered says whether alltoall exchanges size-byte messages scattered.
func scattered(size int) bool { return size <= AllToAllScatter }

// allToAllBytes is the send (and receive) buffer alltoall needs for sizes
// up to largest among ranks: every message of an exchange in its own place,
// side by side, as in osu_alltoall's buffers of N messages, up to
// allToAllBufferMax (allToAllPlaces).
func allToAllBytes(largest, ranks, peers int) int {
	return max((ranks-1)*min(largest, AllToAllScatter), allToAllPlaces(largest, ranks, peers)*largest)
}

// allToAllBufferMax bounds a pairwise exchange's buffer: beyond it, the
// steps take its places in turn. Why: N-1 places of the largest size at a
// full node (64 ranks of 16 MiB) would be a gigabyte a buffer per rank;
// OSU's default largest alltoall message, 1 MiB, stays within it at 64
// ranks.
const allToAllBufferMax = 64 << 20

// allToAllPlaces is how many size-byte places a pairwise exchange among
// ranks cycles through: one per step up to allToAllBufferMax, and at least
// one per step of a block (peers, Spec.Peers).
func allToAllPlaces(size, ranks, peers int) int {
	n := max(ranks-1, 1)
	return max(min(n, allToAllBufferMax/max(size, 1)), min(max(peers, 1), n))
}

// allToAllPlacesIn is how many places this loop's pairwise steps take in
// turn in a buffer of capacity bytes: the settling pass's size may find
// fewer than allToAllPlaces. Once per loop, not per step.
func (l *loop) allToAllPlacesIn(capacity int) int {
	return min(allToAllPlaces(l.size, l.ranks, l.peers), capacity/max(l.size, 1))
}

// stepPeers is how many peers a step exchanges with at once: every one,
// AllToAllThrottle at a time, up to the scatter size; l.peers above.
func (l *loop) stepPeers() int {
	if scattered(l.size) {
		return AllToAllThrottle
	}
	return max(l.peers, 1)
}

// exchangeAll is one whole exchange, every rank sending one message to
// every other: in blocks of stepPeers steps, each step's receive and then
// its send are posted, each in its own buffer, and the block's are waited
// for together. Scattered (scattered(size)) the blocks are
// AllToAllThrottle steps; above, one step unless Spec.Peers says more
// (pairwise). Step k's partners are stepPartners'.
func (l *loop) exchangeAll(i int) error {
	n := l.ranks
	block := l.stepPeers()
	timed := l.timeIterations && i >= l.warmup
	for first := 1; first < n; first += block {
		last := min(first+block, n)
		var began int64
		if timed {
			began = nanotime()
		}
		l.reqs = l.reqs[:0]
		for k := first; k < last; k++ {
			_, from := l.stepPartners(k)
			rq, err := l.t.Irecv(from, l.allToAllSlot(l.rbuf, i, k))
			if err != nil {
				return err
			}
			l.reqs = append(l.reqs, rq)
		}
		for k := first; k < last; k++ {
			s := l.allToAllSlot(l.sbuf, i, k)
			if err := l.fill(s, i, l.rank, k); err != nil {
				return err
			}
			to, _ := l.stepPartners(k)
			sq, err := l.t.Isend(to, s)
			if err != nil {
				return err
			}
			l.reqs = append(l.reqs, sq)
		}
		if err := l.t.Wait(l.reqs...); err != nil {
			return fmt.Errorf("steps %d-%d of %d ranks (%s): %w", first, last-1, n, l.pairing(), err)
		}
		if timed {
			l.blockNS[(first-1)/block][i-l.warmup] = nanotime() - began
		}
		for k := first; k < last; k++ {
			_, from := l.stepPartners(k)
			if err := l.check(l.allToAllSlot(l.rbuf, i, k), i, from, k); err != nil {
				return fmt.Errorf("from rank %d: %w", from, err)
			}
		}
	}
	return nil
}

// stepPartners are the ranks this rank sends to and receives from in
// alltoall step k (1..N-1). Scattered, and pairwise among a number of
// ranks that is no power of two, it sends to (r+k) mod N and receives
// from (r-k) mod N; pairwise among a power of two, it exchanges both ways
// with r XOR k, as MPICH's pairwise exchange does there: each step is
// then a set of disjoint pairs, so no rank waits on a partner that waits
// on a third (under the shift, one late rank holds up the next in a
// chain).
func (l *loop) stepPartners(k int) (to, from int) {
	if l.xorPairs() {
		return l.rank ^ k, l.rank ^ k
	}
	n := l.ranks
	return (l.rank + k) % n, (l.rank - k + n) % n
}

// xorPairs says whether the exchange pairs ranks by XOR (stepPartners).
func (l *loop) xorPairs() bool {
	return !scattered(l.size) && l.ranks&(l.ranks-1) == 0
}

// pairing names stepPartners' rule for errors.
func (l *loop) pairing() string {
	if l.xorPairs() {
		return "with r XOR k"
	}
	return "to r+k, from r-k"
}

// allToAllSlot is the buffer of step k (1..N-1) of iteration i: the k-th
// place of the buffer's side-by-side ones (allToAllBytes), or with several
// buffers (Spec.Buffers), the buffers in turn over the whole run's
// messages.
func (l *loop) allToAllSlot(bufs [][]byte, i, k int) []byte {
	if len(bufs) > 1 {
		return bufs[(i*(l.ranks-1)+k-1)%len(bufs)]
	}
	b := bufs[0][:cap(bufs[0])]
	j := k - 1
	if !scattered(l.size) {
		j %= l.places
	}
	return b[j*l.size : (j+1)*l.size]
}

// rankTimes is one rank's raw times of one size, which Run combines with
// the other ranks' into the size's point.
type rankTimes struct {
	Iters     int     `json:"iters"`
	Warmup    int     `json:"warmup"`
	Window    int     `json:"window"`
	Reps      []int64 `json:"reps"`             // elapsed ns of each timed repetition
	Iter      []int64 `json:"iter"`             // the distribution pass's ns per iteration, less a clock read
	Blocks    []int64 `json:"blocks,omitempty"` // alltoall: the median ns of each block of steps over the distribution pass
	Validated bool    `json:"validated,omitempty"`
}

// measureMulti measures every size of a multi-rank pattern in arena a and
// returns this rank's times, one per size.
func measureMulti(t transports.Transport, rank int, spec Spec, a *arena, beat func(), st *stepper) ([]rankTimes, error) {
	cost := clockCost()
	var out []rankTimes
	err := eachSize(t, rank, spec, a, beat, st, func(l *loop) error {
		reps, err := l.passes(spec.Reps, beat)
		if err != nil {
			return err
		}
		iter := make([]int64, len(l.iterNS))
		for k, ns := range l.iterNS {
			iter[k] = max(ns-cost, 1)
		}
		var blocks []int64
		for _, ns := range l.blockNS {
			blocks = append(blocks, medianNS(ns))
		}
		out = append(out, rankTimes{Iters: l.iters, Warmup: l.warmup, Window: l.window, Reps: reps, Iter: iter, Blocks: blocks, Validated: l.validate})
		return nil
	})
	return out, err
}

// timers are the ranks whose times make a multi-rank pattern's value:
// the senders of mbw_mr, the leads of multi_lat's pairs, incast's rank 0,
// every rank of alltoall.
func (s Spec) timers() []int {
	n := s.RankCount()
	var ranks []int
	for r := range n {
		_, lead := s.partner(r)
		switch {
		case s.Pattern.paired() && lead, s.Pattern == Incast && r == 0, s.Pattern == AllToAll, s.Pattern.Collective():
			ranks = append(ranks, r)
		}
	}
	return ranks
}

// multiValue turns the timers' nanoseconds for n iterations into the
// pattern's metric: MB/s (or messages/s, rate) of all senders over the
// slowest timer's time, or µs averaged over the timers.
func (s Spec) multiValue(ns []int64, n, window, size int, rate bool) float64 {
	senders := float64(s.RankCount() / 2)
	if s.Pattern == Incast {
		senders = float64(s.RankCount() - 1)
	}
	switch {
	case s.Pattern == MultiLatency, s.Pattern == AllToAll, s.Pattern.Collective():
		sum := 0.0
		for _, v := range ns {
			sum += float64(v)
		}
		per := float64(n) * 1e3 * float64(len(ns)) // µs per iteration, averaged
		if s.Pattern == MultiLatency {
			per *= 2 // a round trip is two one-way latencies
		}
		return sum / per
	}
	msgs := senders * float64(window*n)
	slowest := float64(slices.Max(ns))
	if rate {
		return msgs * 1e9 / slowest
	}
	return msgs * float64(size) * 1e3 / slowest
}

// multiPoints combines every rank's times (times[rank][size]) into a point
// per size.
func multiPoints(spec Spec, times [][]rankTimes) ([]Point, error) {
	for r, ts := range times {
		if len(ts) != len(spec.Sizes) {
			return nil, fmt.Errorf("rank %d returned %d sizes' times, want %d", r, len(ts), len(spec.Sizes))
		}
	}
	timers := spec.timers()
	var points []Point
	for i, size := range spec.Sizes {
		first := times[timers[0]][i]
		at := func(pick func(rankTimes) int64) []int64 {
			ns := make([]int64, len(timers))
			for k, r := range timers {
				ns[k] = pick(times[r][i])
			}
			return ns
		}
		var samples, rates, perIter []float64
		for k := range first.Reps {
			ns := at(func(t rankTimes) int64 { return t.Reps[k] })
			samples = append(samples, spec.multiValue(ns, first.Iters, first.Window, size, false))
			rates = append(rates, spec.multiValue(ns, first.Iters, first.Window, size, true))
		}
		for k := range first.Iter {
			ns := at(func(t rankTimes) int64 { return t.Iter[k] })
			perIter = append(perIter, spec.multiValue(ns, 1, first.Window, size, false))
		}
		p := Summarize(size, spec.Pattern.Unit(), samples, perIter)
		p.Iters, p.Warmup, p.Validated = first.Iters, first.Warmup, first.Validated
		switch spec.Pattern {
		case MultiBandwidth, Incast:
			p.MsgRate = Summarize(size, "msg/s", rates, nil).Median
		case AllToAll, AllReduce, AllGather, ReduceScatter, Broadcast:
			var each []float64
			for _, r := range timers {
				var own []float64
				for _, ns := range times[r][i].Reps {
					own = append(own, spec.multiValue([]int64{ns}, first.Iters, 1, size, false))
				}
				each = append(each, Summarize(size, "us", own, nil).Median)
			}
			p.RankMin, p.RankMax = slices.Min(each), slices.Max(each)
			if spec.Pattern == AllToAll {
				p.Steps = stepTimes(timers, times, i)
			}
			if spec.Pattern.Collective() {
				collBandwidth(&p, spec.Pattern, spec.RankCount())
			}
		}
		points = append(points, p)
	}
	return points, nil
}

// stepTimes is alltoall's per-block table of a size (index i of times):
// for each block of steps the median over the ranks of each rank's median
// time, and the slowest rank with its time, in µs. Nil when the ranks
// timed no blocks.
func stepTimes(ranks []int, times [][]rankTimes, i int) []StepTime {
	blocks := len(times[ranks[0]][i].Blocks)
	var out []StepTime
	for b := range blocks {
		st := StepTime{Block: b + 1}
		var all []int64
		for _, r := range ranks {
			bs := times[r][i].Blocks
			if len(bs) != blocks {
				return nil
			}
			all = append(all, bs[b])
			if us := float64(bs[b]) / 1e3; us > st.Max || len(all) == 1 {
				st.Max, st.MaxRank = us, r
			}
		}
		st.Median = float64(medianNS(all)) / 1e3
		out = append(out, st)
	}
	return out
}

// medianNS is the median of ns (floor.go's median), 0 for none.
func medianNS(ns []int64) int64 {
	if len(ns) == 0 {
		return 0
	}
	f := make([]float64, len(ns))
	for i, v := range ns {
		f[i] = float64(v)
	}
	return int64(median(f))
}
