package probe

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

// N2 and N3: NCCL settings that hang or corrupt. Through the NCCL
// installed on the node, two ranks on two GPUs run validated allreduces
// (whole-number floats, exact sums) and grouped send/recv exchanges with
// the probe's NCCL variables set in each rank before NCCL's first call;
// a hang is the watchdog's, a wrong byte the validation's.
//
// N2 (NVIDIA/nccl#1739): an LL128 buffer off NCCL's 120·2^k steps hangs or
// gives wrong results. Both forms allow only LL128 and Simple on the ring
// (NCCL takes LL128 at the middle sizes); the safe one
// keeps the buffer at NCCL's default (or the candidate's, a legal step),
// the unsafe one sets 131072 bytes, the size of the report.
//
// N3 (NVIDIA/nccl#2408, #1496): a chunk larger than NCCL's own gave wrong
// results (NCCL_CHUNK_SIZE of 1 MiB and above) silently. The safe form
// leaves the chunk to NCCL (or the candidate's settings), the unsafe one
// sets NCCL_CHUNK_SIZE to 1 MiB and the NVLink point-to-point chunk to
// twice the buffer.
const ncclSettingKind = "probe-nccl-setting"

type ncclSettingParams struct {
	Env   map[string]string `json:"env"` // NCCL variables, set raw (unchecked) in the rank
	Sizes []int             `json:"sizes"`
	Iters int               `json:"iters"`
}

// ncclSettingSizes are the message sizes both probes validate: one within
// a buffer, one of several buffers, one of many.
var ncclSettingSizes = []int{64 << 10, 4 << 20, 64 << 20}

const ncclSettingIters = 4

// n2BadLL128 is the LL128 buffer of nccl#1739's report: 2^17, no multiple
// of 120.
const n2BadLL128 = 131072

func init() {
	launch.Register(ncclSettingKind, ncclSettingRank)
	register(&Probe{
		ID:          "N2",
		Hazard:      "NCCL_LL128_BUFFSIZE off NCCL's 120·2^k steps: a hang or wrong results (NVIDIA/nccl#1739)",
		Description: "two ranks on two GPUs, LL128 and Simple only, on the ring, validated allreduce and send/recv at 64 KiB, 4 MiB and 64 MiB; unsafe: NCCL_LL128_BUFFSIZE=131072",
		RunOptions: func(ctx context.Context, unsafe bool, deadline time.Duration, opts transports.Options) Verdict {
			// Simple stays allowed: send/recv and the largest sizes use it.
			forced := map[string]string{"NCCL_PROTO": "LL128,Simple", "NCCL_ALGO": "Ring"}
			if unsafe {
				forced["NCCL_LL128_BUFFSIZE"] = strconv.Itoa(n2BadLL128)
			}
			return runNCCLSetting(ctx, deadline, opts, forced)
		},
	})
	register(&Probe{
		ID:          "N3",
		Hazard:      "NCCL chunk sizes above its own: silently wrong results (NVIDIA/nccl#2408, #1496)",
		Description: "two ranks on two GPUs, validated allreduce and send/recv at 64 KiB, 4 MiB and 64 MiB; unsafe: NCCL_CHUNK_SIZE=1 MiB and NCCL_P2P_NVL_CHUNKSIZE twice NCCL_BUFFSIZE",
		RunOptions: func(ctx context.Context, unsafe bool, deadline time.Duration, opts transports.Options) Verdict {
			forced := map[string]string{}
			if unsafe {
				buf, err := n1Size(opts) // four buffers
				if err != nil {
					return Verdict{Outcome: ProbeFailed, Detail: err.Error()}
				}
				forced["NCCL_CHUNK_SIZE"] = strconv.Itoa(1 << 20)
				forced["NCCL_P2P_NVL_CHUNKSIZE"] = strconv.Itoa(buf / 2)
			}
			return runNCCLSetting(ctx, deadline, opts, forced)
		},
	})
}

// runNCCLSetting runs the validated traffic with the candidate's NCCL
// settings (opts, checked) and forced over them (raw).
func runNCCLSetting(ctx context.Context, deadline time.Duration, opts transports.Options, forced map[string]string) Verdict {
	return runNCCLPair(ctx, deadline, opts, forced, ncclSettingKind,
		func(env map[string]string) any {
			return ncclSettingParams{Env: env, Sizes: ncclSettingSizes, Iters: ncclSettingIters}
		},
		fmt.Sprintf("allreduce and send/recv at %s, %d times each, validated", sizeList(ncclSettingSizes), ncclSettingIters))
}

// settingLine is env as NAME=VALUE pairs in name order ("NCCL's defaults"
// when empty).
func settingLine(env map[string]string) string {
	if len(env) == 0 {
		return "NCCL's defaults"
	}
	s := ""
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if s != "" {
			s += " "
		}
		s += k + "=" + env[k]
	}
	return s
}

func sizeList(sizes []int) string {
	s := ""
	for i, n := range sizes {
		if i > 0 {
			s += ", "
		}
		s += cuda.Size(n)
	}
	return s
}

// ncclSettingRank sets the probe's NCCL variables, opens the nccl
// transport and, per size and iteration, allreduces whole numbers and
// exchanges a byte pattern with its peer, checking every element.
func ncclSettingRank(r *launch.Rank) (any, error) {
	var par ncclSettingParams
	if err := r.Params(&par); err != nil {
		return nil, err
	}
	largest := slices.Max(par.Sizes)
	nr, err := openNCCLRank(r, par.Env, nil, largest)
	if err != nil {
		return nil, err
	}
	defer nr.close()
	t, send, recv := nr.t, nr.send, nr.recv
	host, want := make([]byte, largest), make([]byte, largest)
	peer := 1 - r.ID // a pair
	for _, size := range par.Sizes {
		size &^= 3 // whole floats
		sb, rb := sys.BytesAt(send.Ptr(), size), sys.BytesAt(recv.Ptr(), size)
		for it := range par.Iters {
			r.Beat()
			// Allreduce: element e of rank k is (k+1)(e mod 251 + 1) + it.
			for e := range size / 4 {
				binary.LittleEndian.PutUint32(host[4*e:], math.Float32bits(float32((r.ID+1)*(e%251+1)+it)))
			}
			if err := cuda.CopyHtoD(send.Ptr(), host[:size]); err != nil {
				return nil, err
			}
			q, err := t.Collective(transports.AllReduce, sb, rb, 0)
			if err != nil {
				return nil, err
			}
			if err := t.Wait(q); err != nil {
				return nil, err
			}
			n := r.Size
			for e := range size / 4 {
				binary.LittleEndian.PutUint32(want[4*e:], math.Float32bits(float32(n*(n+1)/2*(e%251+1)+n*it)))
			}
			if err := checkDevice(host[:size], want[:size], recv.Ptr(), fmt.Sprintf("allreduce of %s, iteration %d", cuda.Size(size), it)); err != nil {
				return nil, err
			}
			// Send/recv, grouped: this rank's pattern out, the peer's in.
			fillN1(host[:size], r.ID+it)
			if err := cuda.CopyHtoD(send.Ptr(), host[:size]); err != nil {
				return nil, err
			}
			s, err := t.Isend(peer, sb)
			if err != nil {
				return nil, err
			}
			q, err = t.Irecv(peer, rb)
			if err != nil {
				return nil, err
			}
			if err := t.Wait(s, q); err != nil {
				return nil, err
			}
			fillN1(want[:size], peer+it)
			if err := checkDevice(host[:size], want[:size], recv.Ptr(), fmt.Sprintf("send/recv of %s from rank %d, iteration %d", cuda.Size(size), peer, it)); err != nil {
				return nil, err
			}
		}
	}
	return nil, nil
}

// checkDevice copies len(want) bytes at dev into scratch and compares them
// with want, naming what in a validation error.
func checkDevice(scratch, want []byte, dev uintptr, what string) error {
	if err := cuda.CopyDtoH(scratch, dev); err != nil {
		return err
	}
	for i := range want {
		if scratch[i] != want[i] {
			return fmt.Errorf("%s: %s: byte %d is %#x, want %#x", corruptionMarker, what, i, scratch[i], want[i])
		}
	}
	return nil
}
