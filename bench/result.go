package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/transports"
)

// Pattern is a communication pattern.
type Pattern string

const (
	Latency     Pattern = "latency" // blocking ping-pong; one-way time = RTT/2
	Bandwidth   Pattern = "bw"      // window of sends, then a 4-byte ack
	BiBandwidth Pattern = "bibw"    // windows in both directions at once
	MsgRate     Pattern = "msgrate" // messages per second through a window
	AllocChurn  Pattern = "alloc"   // bw with every buffer allocated and freed per message (alloc.go)

	// The multi-rank patterns (multirank.go), of Spec.Ranks ranks.
	MultiBandwidth Pattern = "mbw_mr"    // osu_mbw_mr: N/2 pairs stream windows at once
	MultiLatency   Pattern = "multi_lat" // osu_multi_lat: N/2 pairs ping-pong at once
	Incast         Pattern = "incast"    // ranks 1..N-1 stream windows to rank 0
	AllToAll       Pattern = "alltoall"  // every rank exchanges with every other (exchangeAll)

	// The collectives (collective.go), run whole by a transport that
	// offers them (transports.Collectives: nccl), named as nccl-tests
	// names its binaries, so that its imported results sit beside them.
	AllReduce     Pattern = "all_reduce"
	AllGather     Pattern = "all_gather"
	ReduceScatter Pattern = "reduce_scatter"
	Broadcast     Pattern = "broadcast"
)

// Patterns lists every pattern of a pair of ranks.
var Patterns = []Pattern{Latency, Bandwidth, BiBandwidth, MsgRate, AllocChurn}

// MultiPatterns lists the patterns of Spec.Ranks ranks that run
// over any transport.
var MultiPatterns = []Pattern{MultiBandwidth, MultiLatency, Incast, AllToAll}

// CollectivePatterns lists the collectives, patterns of Spec.Ranks ranks
// that a transport with transports.Collectives runs whole.
var CollectivePatterns = []Pattern{AllReduce, AllGather, ReduceScatter, Broadcast}

// ParsePattern checks a pattern name.
func ParsePattern(s string) (Pattern, error) {
	if s == "lat" { // osu_latency's name, as people shorten it
		return Latency, nil
	}
	if p, ok := collectiveAliases[s]; ok { // OSU's and MPI's spelling
		return p, nil
	}
	for _, p := range slices.Concat(Patterns, MultiPatterns, CollectivePatterns) {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown pattern %q (want latency (or lat), bw, bibw, msgrate, alloc, mbw_mr, multi_lat, incast, alltoall, all_reduce, all_gather, reduce_scatter or broadcast)", s)
}

// Unit is the unit of a pattern's primary metric.
func (p Pattern) Unit() string {
	switch p {
	case Latency, MultiLatency, AllToAll, AllReduce, AllGather, ReduceScatter, Broadcast:
		return "us"
	case MsgRate:
		return "msg/s"
	default:
		return "MB/s"
	}
}

// HigherIsBetter tells how to compare two values of the pattern's metric.
func (p Pattern) HigherIsBetter() bool { return p.Unit() != "us" }

// Spec is one benchmark run: what every rank needs to know.
type Spec struct {
	Transport string             `json:"transport"`
	Options   transports.Options `json:"options,omitempty"`
	Pattern   Pattern            `json:"pattern"`
	Ranks     int                `json:"ranks,omitempty"` // rank processes; 0: 2, as a pair's spec always read (multirank.go)
	Sizes     []int              `json:"sizes"`
	Reps      int                `json:"reps"`
	Iters     int                `json:"iters,omitempty"`  // 0: OSU's default for the size
	Warmup    int                `json:"warmup,omitempty"` // 0: OSU's default for the size
	Window    int                `json:"window"`
	Validate  bool               `json:"validate,omitempty"`
	// Buffers is how many distinct send and receive buffers each rank
	// cycles through, message k of a run using buffer k mod Buffers (0: one,
	// as OSU, or one per window slot under Validate). A working set larger
	// than a transport's registration or IPC-mapping cache shows the cost
	// of its misses.
	Buffers int `json:"buffers,omitempty"`
	// Peers is how many peers a step of alltoall above AllToAllScatter
	// exchanges with at once: posted together, waited for together (0 or
	// 1: one, pairwise, as MPICH does there).
	Peers   int    `json:"peers,omitempty"`
	CPUs    []int  `json:"cpus,omitempty"`
	Backend string `json:"segment_backend,omitempty"`
	// RepBytes, when positive, lowers a size's iteration count (never below
	// 2) so that one repetition moves about this many payload bytes: the
	// tuner's quick mode, which trades per-repetition length for more
	// interleaved repetitions.
	RepBytes int `json:"rep_bytes,omitempty"`
	// Mem is where each rank's message buffers live, OSU's SRC,DST: rank
	// 0's kind, then rank 1's (one kind: both). Empty: host memory on both
	// ranks, as before GPU buffers existed.
	Mem []cuda.MemKind `json:"mem,omitempty"`
	// GPUs are device ordinals: rank r uses GPUs[r mod len(GPUs)]; without
	// them, rank mod the device count (GPUFor). The ranks have GPUs when a
	// kind is not host or GPUs are listed (UsesGPU).
	GPUs []int `json:"gpus,omitempty"`
	// GPULoad is the fraction of each rank's GPU (resident-block slots) the
	// gpuload spin kernel holds during every timed pass (--kernel); 0: none.
	GPULoad float64 `json:"gpu_load,omitempty"`
	// GPULoadBound bounds each launch of the load kernel (--kernel-bound;
	// 0: LoadBound). A path that queues behind the kernel waits for it to
	// end: with a short bound such a pass ends late (Point.LoadLate)
	// instead of hanging.
	GPULoadBound time.Duration `json:"gpu_load_bound,omitempty"`
	// Settle, when positive, is the message size of one pass that opens
	// the run and is not reported: warm-up and timed iterations of the
	// pattern, once, before the first size (WithSettle says why a run
	// needs one; this is the same inside a single run of ranks).
	Settle int `json:"settle,omitempty"`
	// Nodes puts the two ranks on this many nodes: 2 measures an
	// inter-node pair (ranks started by mpirun or srun, gotune --launcher);
	// 0 or 1, a pair on one node.
	Nodes int `json:"nodes,omitempty"`
	// Alternates, when set, are measured side by side in one pair of
	// ranks instead of Transport: each opens in its own part of the
	// segment, and every repetition of a size runs once through each, in
	// turn (Result.Alternates).
	Alternates []Alternate `json:"alternates,omitempty"`
}

// InterNode reports whether the spec measures a pair on two nodes.
func (s Spec) InterNode() bool { return s.Nodes > 1 }

// Point is the measurement of one message size.
type Point struct {
	Size       int       `json:"size"`
	Iters      int       `json:"iters"`
	Warmup     int       `json:"warmup"`
	Unit       string    `json:"unit"`
	Samples    []float64 `json:"samples"` // one per repetition, in Unit
	Median     float64   `json:"median"`
	CILow      float64   `json:"ci_low"`
	CIHigh     float64   `json:"ci_high"`
	Confidence float64   `json:"confidence"` // of the interval, e.g. 0.95
	P50        float64   `json:"p50"`        // over per-iteration values
	P90        float64   `json:"p90"`
	P99        float64   `json:"p99"`
	Validated  bool      `json:"validated,omitempty"` // every payload byte was checked
	Warnings   []string  `json:"warnings,omitempty"`
	// LoadLate counts the timed passes (repetitions and the distribution
	// pass) that the load kernel's time bound ended before the host
	// released the kernel: passes whose transfers waited for the kernel
	// (they stalled behind it) or outlasted the bound.
	LoadLate int `json:"load_late,omitempty"`
	// LoadWait is the longest rank 0 waited at one step of a loaded pass:
	// lining up before the timer starts, or one iteration of any pass,
	// warm-up included. LoadStalled says it was half the kernel's bound or
	// more: the path waited for the kernel to end.
	LoadWait    time.Duration `json:"load_wait,omitempty"`
	LoadStalled bool          `json:"load_stalled,omitempty"`

	// Side values of the multi-rank patterns: MsgRate, mbw_mr's and
	// incast's messages/s of all senders (the median over repetitions,
	// beside their MB/s); RankMin and RankMax, alltoall's fastest and
	// slowest rank, each rank's median time per exchange (µs), as OSU's
	// collectives print Min and Max Latency beside the average.
	MsgRate float64 `json:"msg_rate,omitempty"`
	RankMin float64 `json:"rank_min,omitempty"`
	RankMax float64 `json:"rank_max,omitempty"`
	// Steps is alltoall's time per block of steps (one step each when
	// pairwise) in the distribution pass: where an exchange's time goes,
	// and which rank held a step up.
	Steps []StepTime `json:"steps,omitempty"`
	// AlgBW and BusBW are a collective's bandwidths as nccl-tests states
	// them (GB/s of 10^9 bytes, from the median time): the bytes the
	// collective's buffer holds over the time, and that times the
	// collective's bus factor, what each rank's links carried.
	AlgBW float64 `json:"algbw,omitempty"`
	BusBW float64 `json:"busbw,omitempty"`
}

// StepTime is one block of an alltoall exchange's steps (Point.Steps):
// the median over the ranks of each rank's median time for the block, and
// the slowest rank's, in µs.
type StepTime struct {
	Block   int     `json:"block"`
	Median  float64 `json:"median_us"`
	Max     float64 `json:"max_us"`
	MaxRank int     `json:"max_rank"`
}

// Stalled reports whether the point's path waited for the load kernel to
// end (LoadStalled) rather than moving, however slowly, beside it.
func (p Point) Stalled() bool { return p.LoadStalled }

// Result is a run: provenance, what was asked, and a point per size.
type Result struct {
	Label string `json:"label"` // e.g. "gotune sm", "openmpi vader cma"
	// Metric names which of a tool's measures the points hold where it
	// reports several per pattern and size (nccl-tests: "float/sum
	// out-of-place busbw"); empty for the pattern's own measure. Results
	// compare only with results of the same metric.
	Metric     string              `json:"metric,omitempty"`
	Provenance hostinfo.Provenance `json:"provenance"`
	Spec       Spec                `json:"spec"`
	Points     []Point             `json:"points"`
	// Alternates are the points of each of Spec.Alternates, in order
	// (Points is then empty).
	Alternates [][]Point `json:"alternates,omitempty"`
}

// OSU's loop constants (osu_util.h).
const (
	LargeMessageSize = 8192 // sizes above this use the large-message counts
	DefaultWindow    = 64
	DefaultReps      = 10
)

// DefaultIters returns OSU's iteration and warm-up counts for a pattern and
// message size.
func DefaultIters(p Pattern, size int) (iters, warmup int) {
	large := size > LargeMessageSize
	switch {
	case (p == Latency || p == MultiLatency) && large:
		return 1000, 10
	case p == Latency || p == MultiLatency:
		return 10000, 100
	case (p == AllToAll || p.Collective()) && large: // OMB's collectives (osu_util.h)
		return 100, 10
	case p == AllToAll || p.Collective():
		return 1000, 200
	case large:
		return 20, 2
	default:
		return 100, 10
	}
}

// ParseSizes reads a size list: a power-of-two ladder "MIN:MAX" (1:4M) or a
// comma-separated list (8,64,4K). Suffixes K, M, G are powers of 1024.
func ParseSizes(s string) ([]int, error) {
	if lo, hi, ok := strings.Cut(s, ":"); ok {
		a, err := transports.ParseSize(lo)
		if err != nil {
			return nil, fmt.Errorf("sizes %q: %w", s, err)
		}
		b, err := transports.ParseSize(hi)
		if err != nil {
			return nil, fmt.Errorf("sizes %q: %w", s, err)
		}
		if b < a {
			return nil, fmt.Errorf("sizes %q: ladder ends below its start", s)
		}
		var sizes []int
		if a == 0 {
			sizes, a = append(sizes, 0), 1
		}
		for n := a; n <= b; n *= 2 {
			sizes = append(sizes, n)
			if n > b/2 { // the next doubling passes b (or overflows)
				break
			}
		}
		return sizes, nil
	}
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := transports.ParseSize(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("sizes %q: %w", s, err)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}
