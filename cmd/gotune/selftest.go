package main

// gotune selftest: validate a kernel-assisted single-copy transport on this
// node (xpmem; knem plugs in through selftestModules).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/bytesize"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/payload"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/hostmem"
	"github.com/gotune/gotune/transports/xpmem"
)

// selftestModules says, per transport selftest accepts, what kernel module
// is behind it: its version line, or why it is absent (an error).
var selftestModules = map[string]func(o transports.Options) (string, error){
	"xpmem": func(o transports.Options) (string, error) {
		v, err := xpmem.Probe(o)
		if err != nil {
			return "", err
		}
		dev := o[xpmem.KeyDevice]
		if dev == "" {
			dev = "/dev/xpmem"
		}
		return fmt.Sprintf("xpmem module version %#x (%s)", v, dev), nil
	},
}

const selftestKind = "gotune-selftest"

func init() { launch.Register(selftestKind, selftestRank) }

// selftestSizes cross the sm protocol boundaries (eager 4 KiB, the 64 KiB
// fragment) and reach multi-MiB rendezvous copies.
var selftestSizes = []int{1, 4095, 4096, 4097, 8 << 10, 64<<10 - 1, 64 << 10, 64<<10 + 1, 200 << 10, 1 << 20, 4<<20 + 3}

type selftestParams struct {
	Transport string             `json:"transport"`
	Options   transports.Options `json:"options"`
	Sizes     []int              `json:"sizes"`
	Rounds    int                `json:"rounds"`  // validated rounds of every size, each way
	Fresh     int                `json:"fresh"`   // messages from buffers released right after use
	BWSize    int                `json:"bw_size"` // bandwidth: message size
	BWIters   int                `json:"bw_iters"`
}

// selftestReport is one rank's answer.
type selftestReport struct {
	Validated   int              `json:"validated"`   // messages received and checked across the boundaries
	FreshOK     int              `json:"fresh_ok"`    // messages received into, or sent from, released buffers and checked
	Released    int              `json:"released"`    // buffers this rank released under traffic
	Invalidator bool             `json:"invalidator"` // the transport took the release hook
	Seconds     float64          `json:"seconds"`     // rank 0: the bandwidth loop
	Counters    map[string]int64 `json:"counters,omitempty"`
	Fallback    string           `json:"fallback,omitempty"`
}

func newSelftest() *cobra.Command {
	var transport string
	var opts []string
	var bwSize string
	var bwIters int
	cmd := &cobra.Command{
		Use:   "selftest",
		Short: "Validate a kernel-assisted single-copy transport on this node (xpmem)",
		Long: "selftest says which module version it found, then runs two ranks over the transport: validated\n" +
			"messages across every protocol boundary in both directions, buffers released (purged) between\n" +
			"messages so the transport's invalidation runs under traffic, and a bandwidth loop. It fails,\n" +
			"saying why, where the module is absent or anything does not check out.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := parseOpts(opts)
			if err != nil {
				return err
			}
			n, err := bytesize.Parse(bwSize)
			if err != nil {
				return fmt.Errorf("--bw-size %q: %w", bwSize, err)
			}
			return runSelftest(cmd.Context(), cmd.OutOrStdout(), transport, o, n, bwIters)
		},
	}
	cmd.Flags().StringVarP(&transport, "transport", "t", "xpmem", "transport to test: "+strings.Join(slices.Sorted(maps.Keys(selftestModules)), ", "))
	cmd.Flags().StringArrayVar(&opts, "opt", nil, "transport option KEY=VALUE (repeatable)")
	cmd.Flags().StringVar(&bwSize, "bw-size", "4M", "message size of the bandwidth loop")
	cmd.Flags().IntVar(&bwIters, "bw-iters", 64, "messages in the bandwidth loop")
	return cmd
}

func runSelftest(ctx context.Context, w io.Writer, name string, o transports.Options, bwSize, bwIters int) error {
	fail := func(err error) error {
		fmt.Fprintf(w, "selftest %s: FAIL: %v\n", name, err)
		return &exitStatus{code: 1, err: fmt.Errorf("selftest %s failed", name)}
	}
	module, ok := selftestModules[name]
	if !ok {
		return fmt.Errorf("selftest --transport %q: want one of %s", name, strings.Join(slices.Sorted(maps.Keys(selftestModules)), ", "))
	}
	if bwSize < 1 || bwIters < 1 {
		return fmt.Errorf("selftest: --bw-size %d and --bw-iters %d must be positive", bwSize, bwIters)
	}
	d, err := transports.Lookup(name)
	if err != nil {
		return fail(err)
	}
	if err := transports.CheckKeys(o); err != nil {
		return err
	}
	line, err := module(o)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(w, "selftest %s: %s\n", name, line)
	seg, err := d.SharedBytes(2, o)
	if err != nil {
		return err
	}
	p := selftestParams{Transport: name, Options: o, Sizes: selftestSizes, Rounds: 2, Fresh: 24, BWSize: bwSize, BWIters: bwIters}
	params, _ := json.Marshal(p) // plain data always encodes
	res, err := launch.Run(ctx, launch.Job{Kind: selftestKind, Size: 2, SegmentBytes: seg, Params: params, Stall: 120 * time.Second}, launch.Hooks{})
	if err != nil {
		return fail(err)
	}
	var reps [2]selftestReport
	for r := range reps {
		if err := json.Unmarshal(res[r], &reps[r]); err != nil {
			return fail(fmt.Errorf("rank %d's report: %w", r, err))
		}
	}
	fmt.Fprintf(w, "  validated: %d messages of %d sizes (%d to %d bytes, across the eager and fragment limits) each way, %d rounds\n",
		reps[0].Validated+reps[1].Validated, len(p.Sizes), p.Sizes[0], p.Sizes[len(p.Sizes)-1], p.Rounds)
	for r, rep := range reps {
		if rep.Fallback != "" {
			return fail(fmt.Errorf("rank %d gave single copy up: %s", r, rep.Fallback))
		}
	}
	inv := "the transport keeps no state about buffers (no release hook)"
	if reps[0].Invalidator {
		c0, c1 := reps[0].Counters, reps[1].Counters
		inv = fmt.Sprintf("the transport's release hook ran for %d buffers; %d and %d cached entries dropped on ranks 0 and 1",
			reps[0].Released+reps[1].Released, c0["invalidations"], c1["invalidations"])
		if c0["invalidations"]+c1["invalidations"] == 0 && c0["posted"]+c1["posted"] > 0 {
			return fail(errors.New("released buffers reached no peer's cache (no invalidation)"))
		}
	}
	fmt.Fprintf(w, "  invalidation: %d messages in buffers purged right after use, validated; %s\n", reps[0].FreshOK+reps[1].FreshOK, inv)
	sec := reps[0].Seconds
	fmt.Fprintf(w, "  bandwidth: %d x %s rank 0 -> 1 in %.3f s: %.2f GB/s\n", bwIters, bytesize.Format(bwSize), sec, float64(bwSize)*float64(bwIters)/sec/1e9)
	for r, rep := range reps {
		if len(rep.Counters) > 0 {
			var kv []string
			for _, k := range slices.Sorted(maps.Keys(rep.Counters)) {
				kv = append(kv, fmt.Sprintf("%s=%d", k, rep.Counters[k]))
			}
			fmt.Fprintf(w, "  rank %d: %s\n", r, strings.Join(kv, " "))
		}
	}
	fmt.Fprintf(w, "selftest %s: PASS\n", name)
	return nil
}

// counters is implemented by transports that count what their caches did.
type counters interface{ Counters() map[string]int64 }

func selftestRank(r *launch.Rank) (any, error) {
	var p selftestParams
	if err := r.Params(&p); err != nil {
		return nil, err
	}
	t, err := bench.Open(r, p.Transport, p.Options)
	if err != nil {
		return nil, err
	}
	cfg := hostmem.DefaultConfig()
	cfg.Purge = hostmem.Immediate
	heap, err := hostmem.New(cfg)
	if err != nil {
		return nil, err
	}
	var rep selftestReport
	unhook := func() {}
	if inv, ok := t.(transports.Invalidator); ok {
		rep.Invalidator, unhook = true, heap.OnRelease(inv.Invalidate)
	}
	peer := 1 - r.ID
	msg := 0
	exchange := func(n int, fresh bool, b []byte) error {
		for from := range 2 {
			msg++
			buf := b
			if fresh {
				var err error
				if buf, err = heap.Alloc(n); err != nil {
					return err
				}
			}
			if from == r.ID {
				payload.Fill(buf[:n], selftestKey(msg))
				if err := t.Send(peer, buf[:n]); err != nil {
					return fmt.Errorf("send %d bytes: %w", n, err)
				}
			} else {
				clear(buf[:n])
				got, err := t.Recv(peer, buf[:n])
				if err != nil {
					return fmt.Errorf("receive %d bytes: %w", n, err)
				}
				if k := payload.Check(buf[:n], selftestKey(msg)); got != n || k >= 0 {
					return fmt.Errorf("payload validation failed: message %d of %d bytes from rank %d: got %d bytes, first difference at byte %d", msg, n, from, got, k)
				}
				if fresh {
					rep.FreshOK++
				} else {
					rep.Validated++
				}
			}
			if fresh {
				if err := r.Barrier(); err != nil { // no release under a peer's copy
					return err
				}
				if err := heap.Free(buf); err != nil {
					return err
				}
				rep.Released++
			}
		}
		return nil
	}
	big, err := heap.Alloc(max(slices.Max(p.Sizes), p.BWSize))
	if err != nil {
		return nil, err
	}
	for range p.Rounds {
		for _, n := range p.Sizes {
			if err := exchange(n, false, big); err != nil {
				return nil, err
			}
		}
		r.Beat()
	}
	for i := range p.Fresh {
		if err := exchange([]int{64 << 10, 200 << 10, 1 << 20}[i%3], true, nil); err != nil {
			return nil, err
		}
	}
	if err := r.Barrier(); err != nil {
		return nil, err
	}
	start := time.Now()
	for range p.BWIters {
		if r.ID == 0 {
			err = t.Send(peer, big[:p.BWSize])
		} else {
			_, err = t.Recv(peer, big[:p.BWSize])
		}
		if err != nil {
			return nil, fmt.Errorf("bandwidth loop: %w", err)
		}
	}
	ack := big[:1]
	if r.ID == 0 {
		_, err = t.Recv(peer, ack)
	} else {
		err = t.Send(peer, ack)
	}
	if err != nil {
		return nil, err
	}
	rep.Seconds = time.Since(start).Seconds()
	if c, ok := t.(counters); ok {
		rep.Counters = c.Counters()
	}
	if f, ok := t.(interface{ Fallbacks() map[int]error }); ok {
		if why := f.Fallbacks()[peer]; why != nil {
			rep.Fallback = why.Error()
		}
	}
	if err := r.Barrier(); err != nil {
		return nil, err
	}
	unhook()
	if err := errors.Join(heap.Free(big), t.Close()); err != nil {
		return nil, err
	}
	return rep, heap.Close()
}

// selftestKey names message msg.
func selftestKey(msg int) uint64 { return uint64(msg)<<32 ^ 0x3c }
