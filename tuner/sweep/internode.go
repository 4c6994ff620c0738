package sweep

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/bytesize"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/ib"
	"github.com/gotune/gotune/transports/tcp"
)

// Inter-node stages: when the run's ranks span nodes (gotune sweep
// --launcher mpirun|srun on two or more nodes), the pair that crosses nodes
// gets its own decisions: which inter-node transport, its eager limit, and
// the transport's protocol knobs (tcp's connections per pair, ib's
// rendezvous by RDMA read or write), and its buffering (tcp's socket
// buffers, ib's credits: receive slots per peer). Each stage weighs its candidates in
// interleaved rounds with pickCheapest, like the host stages.
const (
	stageInterTransport = "internode-transport"
	stageInterEager     = "internode-eager"
	stageInterProtocol  = "internode-protocol"
	stageInterQueue     = "internode-queue"
)

// InternodePlan is the inter-node part of a plan, used only when the run
// spans nodes.
type InternodePlan struct {
	Transports []string `json:"transports" mapstructure:"transports" help:"inter-node transports to weigh when the ranks span nodes: tcp, ib (one that cannot start on these nodes is dropped)"`
	Eager      []Size   `json:"eager" mapstructure:"eager" help:"eager-limit candidates of the chosen inter-node transport (tcp.eager, ib.eager)"`
	Conns      []int    `json:"conns" mapstructure:"conns" help:"tcp.conns candidates: connections per pair that rendezvous payloads are striped over"`
	Rendezvous []string `json:"rendezvous" mapstructure:"rendezvous" help:"ib.rndv candidates: read, write"`
	Credits    []int    `json:"credits" mapstructure:"credits" help:"ib.credits candidates: eager receive slots per peer (registered memory grows with them)"`
	SocketBufs []Size   `json:"socket_buffers" mapstructure:"socket_buffers" help:"tcp.sndbuf and tcp.rcvbuf candidates, set together (0: the kernel's autotuning)"`
	Sizes      SizeList `json:"sizes" mapstructure:"sizes" help:"sizes of the inter-node stages (latency and bandwidth)"`
}

// Check reports an inter-node plan that cannot run.
func (ip InternodePlan) Check() error {
	for _, t := range ip.Transports {
		if t != "tcp" && t != "ib" {
			return fmt.Errorf("internode.transports: %q: want tcp or ib", t)
		}
	}
	for _, n := range ip.Conns {
		if n < 1 {
			return fmt.Errorf("internode.conns: %d: want at least 1", n)
		}
	}
	for _, n := range ip.Credits {
		if n < 1 {
			return fmt.Errorf("internode.credits: %d: want at least 1", n)
		}
	}
	for _, m := range ip.Rendezvous {
		if m != "read" && m != "write" {
			return fmt.Errorf("internode.rendezvous: %q: want read or write", m)
		}
	}
	if len(ip.Transports) > 0 && ip.Sizes.Empty() {
		return fmt.Errorf("internode.sizes: empty, with internode.transports to weigh")
	}
	return nil
}

var internodePatterns = []bench.Pattern{bench.Latency, bench.Bandwidth}

// InternodeParams is what the inter-node stages decided.
type InternodeParams struct {
	Transport string
	Eager     int
	Options   transports.Options // the transport's own, eager limit included
}

// internodeCandidate is one inter-node configuration on a pair of nodes.
func internodeCandidate(name, transport string, opts transports.Options, cost int64) candidate {
	return candidate{name: name, transport: transport, opts: opts, cost: cost, nodes: 2}
}

// internodeStages decides the inter-node pair's configuration; it does
// nothing when the run is on one node.
func (r *Runner) internodeStages(out *Outcome) error {
	ip := r.plan.Internode
	if len(r.meta.Nodes) < 2 || len(ip.Transports) == 0 {
		return nil
	}
	sizes := ip.Sizes.Sizes()
	var cands []candidate
	for i, t := range ip.Transports {
		if _, err := transports.Lookup(t); err != nil {
			r.notes = append(r.notes, fmt.Sprintf("internode: %s is not built in: %v", t, err))
			continue
		}
		cands = append(cands, internodeCandidate(t, t, nil, int64(i)))
	}
	chosen, err := r.internodeStage(out, stageInterTransport, cands, sizes)
	if err != nil {
		return err
	}
	if chosen == nil {
		r.notes = append(r.notes, "internode: no inter-node transport ran between the nodes; no inter-node decisions")
		return nil
	}
	t := chosen.transport
	params := InternodeParams{Transport: t, Options: transports.Options{}}

	// Eager limit, around the sizes it moves.
	def, err := defaultEager(t)
	if err != nil {
		return err
	}
	params.Eager = def
	cands = cands[:0]
	for i, e := range ip.Eager {
		cands = append(cands, internodeCandidate(fmt.Sprintf("%s-eager-%s", t, transports.FormatSize(int(e))), t,
			transports.Options{t + ".eager": transports.FormatSize(int(e))}, int64(i)))
	}
	if err := r.internodeOptions(out, stageInterEager, cands, sizes, &params); err != nil {
		return err
	}
	if e, ok := params.Options[t+".eager"]; ok {
		params.Eager, _ = transports.ParseSize(e)
	}

	// The protocol knob of the chosen transport.
	cands = cands[:0]
	switch t {
	case "tcp":
		for i, n := range ip.Conns {
			cands = append(cands, internodeCandidate(fmt.Sprintf("tcp-conns-%d", n), t,
				params.Options.With(transports.Options{tcp.KeyConns: itoa(n)}), int64(n*10+i)))
		}
	case "ib":
		for i, m := range ip.Rendezvous {
			cands = append(cands, internodeCandidate("ib-rndv-"+m, t,
				params.Options.With(transports.Options{ib.KeyRndv: m}), int64(i)))
		}
	}
	if err := r.internodeOptions(out, stageInterProtocol, cands, sizes, &params); err != nil {
		return err
	}

	// Buffering: what the transport keeps per peer.
	cands = queueCandidates(ip, t, params.Options)
	if err := r.internodeOptions(out, stageInterQueue, cands, sizes, &params); err != nil {
		return err
	}
	out.Internode = &params
	return nil
}

// internodeStage measures cands as stage over the inter-node patterns,
// records the decision in out and returns the chosen candidate (nil: none
// ran).
func (r *Runner) internodeStage(out *Outcome, stage string, cands []candidate, sizes []int) (*candidate, error) {
	if err := r.measure(stage, cands, internodePatterns, sizes, r.plan.Rounds); err != nil {
		return nil, err
	}
	d := pickCheapest(r.trials, stage, internodePatterns, cands)
	out.Stages = append(out.Stages, d)
	return find(cands, d.Chosen), nil
}

// internodeOptions is a stage among option candidates (none: no stage):
// a copy of the chosen one's options becomes params'.
func (r *Runner) internodeOptions(out *Outcome, stage string, cands []candidate, sizes []int, params *InternodeParams) error {
	if len(cands) == 0 {
		return nil
	}
	c, err := r.internodeStage(out, stage, cands, sizes)
	if err != nil {
		return err
	}
	if c != nil {
		params.Options = c.opts.With(nil)
	}
	return nil
}

// queueCandidates are the buffering candidates of transport t over the
// options chosen so far, cheapest (least memory) first.
func queueCandidates(ip InternodePlan, t string, opts transports.Options) []candidate {
	var cands []candidate
	switch t {
	case "tcp":
		for _, b := range ip.SocketBufs {
			v := transports.FormatSize(int(b))
			cands = append(cands, internodeCandidate("tcp-buffers-"+v, t,
				opts.With(transports.Options{tcp.KeySndBuf: v, tcp.KeyRcvBuf: v}), int64(b)))
		}
	case "ib":
		for _, n := range ip.Credits {
			cands = append(cands, internodeCandidate(fmt.Sprintf("ib-credits-%d", n), t,
				opts.With(transports.Options{ib.KeyCredits: itoa(n)}), int64(n)))
		}
	}
	return cands
}

// unprefixed names a transport's options as a profile holds them
// (profile.Decision.Options): without the transport's prefix.
func unprefixed(transport string, o transports.Options) map[string]string {
	out := map[string]string{}
	for k, v := range o {
		out[strings.TrimPrefix(k, transport+".")] = v
	}
	return out
}

// defaultEager is a transport's built-in eager limit, from its options.
func defaultEager(transport string) (int, error) {
	d, err := transports.Lookup(transport)
	if err != nil {
		return 0, err
	}
	for _, set := range d.Options {
		for _, o := range set.Options {
			if o.Key == transport+".eager" {
				return transports.ParseSize(o.Default)
			}
		}
	}
	return 0, fmt.Errorf("transport %s has no %s.eager option", transport, transport)
}

// internodeFootprint says what the decision costs per peer.
func internodeFootprint(p InternodeParams) string {
	switch p.Transport {
	case "ib":
		credits, _ := transports.Options(p.Options).Int(ib.KeyCredits, ib.DefaultCredits)
		slot := (ibHeader + p.Eager + 63) / 64 * 64
		per := int64(2 * credits * slot) // as many send slots as receive slots
		return fmt.Sprintf("registered memory per peer: %s (%d receive and %d send slots of %s), plus the registration cache of user buffers",
			bytesize.Human(per), credits, credits, transports.FormatSize(slot))
	default:
		conns, _ := transports.Options(p.Options).Int(tcp.KeyConns, 1)
		return fmt.Sprintf("no registered memory; %d socket(s) per peer with the kernel's buffers", conns)
	}
}

// ibHeader is the ib transport's slot layout (a 32-byte header before each
// eager payload, slots of 64-byte multiples), for the footprint line.
const ibHeader = 32

// internodeSummary is one line per decided option, for the summary.
func internodeSummary(p *InternodeParams) string {
	keys := make([]string, 0, len(p.Options))
	for k := range p.Options {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "transport %s, eager limit %s", p.Transport, transports.FormatSize(p.Eager))
	for _, k := range keys {
		fmt.Fprintf(&b, ", %s=%s", k, p.Options[k])
	}
	return b.String()
}
