package stack

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/launch"
	libnccl "github.com/gotune/gotune/internal/nccl"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/nccl"
)

// NCCL tunes the NCCL installed on the node through itself: every
// contender is a fresh pair of gotune ranks (`gotune bench -t nccl`),
// one per GPU, whose NCCL reads the contender's values from its
// environment, as it would from nccl.conf, at its first call. NCCL caches
// most values for its process's life, so nothing but a fresh process
// measures a value. Point-to-point parameters are weighed on bw, the
// collectives' on all_reduce.
type NCCL struct {
	// Params replaces the built-in space when set (tests weigh less).
	Params  []Param
	version string
}

// Name is the profile's name for the stack.
func (*NCCL) Name() string { return "nccl" }

// Prepare finds NCCL and two GPUs; without them an error matching
// sys.ErrNotSupported.
func (n *NCCL) Prepare(context.Context, string) error {
	lib, err := libnccl.Load()
	if err != nil {
		return err
	}
	if err := cuda.Load(); err != nil {
		return err
	}
	count, err := cuda.DeviceCount()
	if err != nil {
		return err
	}
	if count < 2 {
		return sys.NotSupported("nccl", fmt.Sprintf("%d CUDA device(s): tuning NCCL measures a pair of GPUs", count), nil)
	}
	n.version = lib.Version.String()
	return nil
}

// ncclDefault stands for a parameter NCCL derives itself (from the
// topology, the GPU, the other values): the contender sets nothing.
const ncclDefault = "auto"

// Space: the buffer and its NVLink chunk (coupled: the chunk is an
// eighth of the buffer, NCCL's step count, and a chunk above that is
// what NVIDIA/nccl#2408 and #1496 report as wrong results), the chunk
// alone (smaller only), the LL threshold of point-to-point, the channels
// point-to-point may spread over (NCCL gives an NVLink peer as many as
// it has channels, up to twice its links, and builds no more channels
// for point-to-point than the collectives' rings unless told), then for the
// collectives the threads per CTA, the CTAs, the protocols and the LL128
// buffer at its safe steps. Values[0] is 2.28's default.
func (n *NCCL) Space() []Param {
	if n.Params != nil {
		return n.Params
	}
	p2p := []int{64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20}
	small := []int{1 << 10, 4 << 10, 16 << 10, 64 << 10}
	coll := []int{64 << 10, 1 << 20, 16 << 20, 256 << 20}
	return []Param{
		{Name: "buffsize", Values: []string{"4194304", "8388608", "2097152"}, Pattern: bench.Bandwidth, Sizes: p2p,
			With: map[string]map[string]string{"8388608": {"p2p_nvl_chunksize": "1048576"}, "2097152": {"p2p_nvl_chunksize": "262144"}}},
		{Name: "p2p_nvl_chunksize", Values: []string{ncclDefault, "131072", "262144"}, Pattern: bench.Bandwidth, Sizes: p2p},
		{Name: "p2p_ll_threshold", Values: []string{"16384", "0", "65536"}, Pattern: bench.Bandwidth, Sizes: small},
		{Name: "min_p2p_nchannels", Values: []string{ncclDefault, "32", "64"}, Pattern: bench.Bandwidth, Sizes: p2p},
		{Name: "nthreads", Values: []string{ncclDefault, "256"}, Pattern: bench.AllReduce, Sizes: coll},
		{Name: "max_ctas", Values: []string{ncclDefault, "16", "32"}, Pattern: bench.AllReduce, Sizes: coll},
		{Name: "proto", Values: []string{ncclDefault, "^LL128", "LL,Simple"}, Pattern: bench.AllReduce, Sizes: coll},
		{Name: "ll128_buffsize", Values: []string{"4915200", "9830400", "2457600"}, Pattern: bench.AllReduce, Sizes: coll},
	}
}

// ConfirmPatterns: a file is confirmed where its values act, on
// bandwidth (point-to-point) and on all_reduce (the collectives), and
// must lose on neither.
func (*NCCL) ConfirmPatterns() []bench.Pattern {
	return []bench.Pattern{bench.Bandwidth, bench.AllReduce}
}

// ncclOptions are params as the nccl transport's options; a parameter the
// transport does not set is an error naming it.
func ncclOptions(params map[string]string) (transports.Options, error) {
	o := transports.Options{}
	for _, name := range slices.Sorted(maps.Keys(params)) {
		v := params[name]
		if v == ncclDefault {
			continue
		}
		key, ok := nccl.OptionFor("NCCL_" + strings.ToUpper(name))
		if !ok {
			return nil, fmt.Errorf("nccl parameter %s: the nccl transport does not set NCCL_%s", name, strings.ToUpper(name))
		}
		o[key] = v
	}
	if _, err := nccl.Settings(o); err != nil {
		return nil, err
	}
	return o, nil
}

// ncclSpec is spec measured through the nccl transport with params: a
// pair of ranks, one per GPU, device buffers.
func ncclSpec(spec bench.Spec, params map[string]string) (bench.Spec, error) {
	o, err := ncclOptions(params)
	if err != nil {
		return spec, err
	}
	spec.Transport, spec.Options, spec.Mem, spec.CPUs = "nccl", o, nil, nil
	if spec.Pattern.Collective() {
		spec.Ranks = 2
	}
	return spec, nil
}

// Contender measures with params in fresh ranks; the result's provenance
// names NCCL's version.
func (n *NCCL) Contender(_, label string, params map[string]string) mpistack.Contender {
	return mpistack.Contender{Label: "nccl " + label, Run: func(ctx context.Context, spec bench.Spec) (bench.Result, error) {
		s, err := ncclSpec(spec, params)
		if err != nil {
			return bench.Result{}, err
		}
		res, err := bench.Run(ctx, s, 0, launch.Hooks{})
		if err != nil {
			return res, err
		}
		res.Label = "nccl " + label
		if res.Provenance.Libraries == nil {
			res.Provenance.Libraries = map[string]string{}
		}
		res.Provenance.Libraries["nccl"] = n.version
		return res, nil
	}}
}

// Check sends validated windows both ways and runs a validated
// all_reduce with params loaded, bounded: nil, or an error matching
// mpistack.ErrHang, ErrCorrupt or ErrCrash.
func (n *NCCL) Check(ctx context.Context, _ string, params map[string]string) error {
	for _, p := range []bench.Pattern{bench.Bandwidth, bench.BiBandwidth, bench.AllReduce} {
		s, err := ncclSpec(bench.Spec{Pattern: p, Sizes: checkSizes, Reps: 1, Window: 16, Validate: true}, params)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, mpistack.LaunchBound)
		_, err = bench.Run(ctx, s, 0, launch.Hooks{})
		cancel()
		if err != nil {
			return ncclHazard(p, err)
		}
	}
	return nil
}

// ncclHazard sorts a failed check run into the stack hazards.
func ncclHazard(p bench.Pattern, err error) error {
	var stall *launch.StallError
	switch {
	case strings.Contains(err.Error(), "payload validation failed"):
		return fmt.Errorf("nccl %s: %w: %v", p, mpistack.ErrCorrupt, err)
	case errors.As(err, &stall), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("nccl %s: %w: %v", p, mpistack.ErrHang, err)
	}
	return fmt.Errorf("nccl %s: %w: %v", p, mpistack.ErrCrash, err)
}
