package probe

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"time"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/nccl"
)

// What the NCCL probes (N1-N4) share: a pair job run with the candidate's
// NCCL settings, and a rank's transport with its two device buffers.

// runNCCLPair runs a two-rank job of kind through the installed NCCL with
// the candidate's settings (opts, checked) and forced over them (raw);
// params makes the job's parameters from the settings. A pass is passed's
// detail, anything else names the settings.
func runNCCLPair(ctx context.Context, deadline time.Duration, opts transports.Options, forced map[string]string,
	kind string, params func(env map[string]string) any, passed string) (v Verdict) {
	if err := nccl.Present(opts); err != nil {
		v.Outcome, v.Detail = ProbeFailed, "no NCCL and GPU to probe: "+err.Error()
		return v
	}
	env, err := nccl.Settings(opts)
	if err != nil {
		v.Outcome, v.Detail = ProbeFailed, err.Error()
		return v
	}
	maps.Copy(env, forced)
	setting := settingLine(env)
	b, _ := json.Marshal(params(env)) // plain data always encodes
	_, err = launch.Run(ctx, launch.Job{Kind: kind, Size: 2, Params: b, Stall: deadline}, quiet)
	if errors.Is(err, sys.ErrNotSupported) {
		v.Outcome, v.Detail = ProbeFailed, "no NCCL pair to probe: "+err.Error()
		return v
	}
	if v.Outcome, v.Detail, v.Stacks = classify(err); v.Outcome != Passed {
		v.Detail = setting + ": " + v.Detail
		return v
	}
	v.Detail = setting + ": " + passed
	return v
}

// ncclRank is a probe rank's nccl transport and a send and a receive
// buffer of device memory on its GPU.
type ncclRank struct {
	t          *nccl.Transport
	send, recv *cuda.Buffer
}

// openNCCLRank sets env in the rank's environment (raw, before NCCL's
// first call, which reads it), opens the nccl transport with opts and
// allocates both buffers of size bytes. close undoes it.
func openNCCLRank(r *launch.Rank, env map[string]string, opts transports.Options, size int) (*ncclRank, error) {
	for k, v := range env {
		if err := os.Setenv(k, v); err != nil {
			return nil, err
		}
	}
	tr, err := nccl.New(rankEnv(r, opts))
	if err != nil {
		return nil, err
	}
	nr := &ncclRank{t: tr.(*nccl.Transport)}
	if nr.send, err = nr.t.GPU().Alloc(cuda.MemDevice, size); err == nil {
		nr.recv, err = nr.t.GPU().Alloc(cuda.MemDevice, size)
	}
	if err != nil {
		return nil, errors.Join(err, nr.close())
	}
	return nr, nil
}

func (nr *ncclRank) close() error {
	var errs []error
	for _, b := range []*cuda.Buffer{nr.send, nr.recv} {
		if b != nil {
			errs = append(errs, b.Free())
		}
	}
	return errors.Join(append(errs, nr.t.Close())...)
}
