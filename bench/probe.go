package bench

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports"
)

const probeKind = "probe-transport"

type probeParams struct {
	Transport string             `json:"transport"`
	Options   transports.Options `json:"options,omitempty"`
}

func init() { launch.Register(probeKind, probeMain) }

// probeSizes cover every protocol of the host transports: eager, pipelined,
// and single copy at its default threshold.
var probeSizes = []int{0, 8, 4096, 64 << 10, 1 << 20}

func probeMain(r *launch.Rank) (any, error) {
	var p probeParams
	if err := r.Params(&p); err != nil {
		return nil, err
	}
	t, err := Open(r, p.Transport, p.Options)
	if err != nil {
		return nil, err
	}
	spec := Spec{Transport: p.Transport, Pattern: BiBandwidth, Sizes: probeSizes, Reps: 1, Iters: 2, Warmup: 1, Window: 4, Validate: true}
	if _, err := Measure(t, r.ID, spec, r.Beat); err != nil {
		return nil, err
	}
	return true, t.Close()
}

// Probe checks that a transport works here: two fresh ranks start it, run its
// own check, and exchange validated messages of every protocol both ways. A
// transport this machine cannot offer yields an error matching
// transports.ErrNotSupported, with the reason.
func Probe(ctx context.Context, transport string, opts transports.Options) error {
	d, err := transports.Lookup(transport)
	if err != nil {
		return err
	}
	seg, err := d.SharedBytes(2, opts)
	if err != nil {
		return err
	}
	params, err := json.Marshal(probeParams{Transport: transport, Options: opts})
	if err != nil {
		return err
	}
	if _, err := launch.Run(ctx, launch.Job{Kind: probeKind, Size: 2, SegmentBytes: seg, Params: params}, launch.Hooks{}); err != nil {
		return fmt.Errorf("probe %s: %w", transport, err)
	}
	return nil
}
