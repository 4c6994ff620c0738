package auto

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// Option keys.
const (
	KeyProfile, KeyHash, KeyOverrides = "auto.profile", "auto.hash", "auto.overrides"
	KeyLocality, KeyMemory            = "auto.locality", "auto.memory"
)

// Options are the options the selector reads.
var Options = &transports.OptionSet{Name: "auto", Options: []transports.Option{
	{Key: KeyProfile, Type: "path", Help: "profile file (YAML) whose decisions route every message"},
	{Key: KeyHash, Type: "text", Help: "content hash the profile must have (set by the launching process; ranks refuse a profile that changed)"},
	{Key: KeyOverrides, Type: "text", Help: "the GOTUNE_ overrides the launching process applied (ranks refuse to route differently)"},
	{Key: KeyLocality, Type: "text", Help: "decision locality to use: intranode or internode (default: the pair's, from the ranks' hosts)"},
	{Key: KeyMemory, Type: "text", Default: profile.HostHost, Help: "memory pair to use, source_destination"},
}}

// Route is a loaded profile decision, ready for the engine.
type Route struct {
	Profile  *profile.Profile
	Decision profile.Decision
	Locality string
	mins     []int    // range starts, ascending
	single   []string // the range's single-copy mechanism (cma, knem, xpmem), "" for sm
	modes    []string // the range's copy direction (pull, push), "" for the mechanism's own
	SM       sm.Params
}

// Load reads the profile named by the options and prepares its routes.
func Load(o transports.Options) (*Route, error) {
	path := o[KeyProfile]
	if path == "" {
		return nil, fmt.Errorf("transport auto needs a profile: --profile FILE (option auto.profile)")
	}
	p, err := profile.Load(path)
	if err != nil {
		return nil, err
	}
	want := o[KeyHash]
	if want == "" {
		return nil, fmt.Errorf("profile %s: no auto.hash: the launching process must pass the hash it loaded", path)
	}
	if want != p.Hash {
		return nil, fmt.Errorf("profile %s: content hash %s, but the job was started with %s: the file changed", path, p.Hash, want)
	}
	if got := Overrides(p); got != o[KeyOverrides] {
		return nil, fmt.Errorf("profile %s: this rank's GOTUNE_ overrides (%q) differ from the launching process's (%q)", path, got, o[KeyOverrides])
	}
	loc, mem := o[KeyLocality], o[KeyMemory]
	if loc == "" {
		loc = profile.Intranode
	}
	if mem == "" {
		mem = profile.HostHost
	}
	d, ok := p.Decisions[loc][mem]
	if !ok {
		return nil, fmt.Errorf("profile %s: no decision for decisions.%s.%s", path, loc, mem)
	}
	r := &Route{Profile: p, Decision: d, Locality: loc}
	if loc == profile.Internode {
		return r, nil // the inter-node transport's own options carry it
	}
	for _, rg := range d.Ranges {
		r.mins = append(r.mins, rg.Min)
		mech := ""
		if rg.Protocol == "rendezvous" {
			mech = rg.Transport
		}
		r.single = append(r.single, mech)
		r.modes = append(r.modes, rg.Mode)
	}
	r.SM, err = sm.ChannelParams(sm.Channel{Depth: d.FIFODepth, DepthRanks: d.FIFODepthRanks, CellSize: d.CellSize, EagerLimit: d.EagerLimit,
		FragSize: d.FragSize, FragSlots: d.FragSlots, Copy: d.Copy, Progress: d.Progress, Park: d.Park})
	if err != nil {
		return nil, fmt.Errorf("profile %s: decisions.%s.%s: %w", path, loc, mem, err)
	}
	if r.SM.Budget, err = o.Int(sm.KeyBudget, 0); err != nil {
		return nil, err
	}
	return r, r.SM.Validate()
}

// UsesSingleCopy reports whether any range goes by single copy.
func (r *Route) UsesSingleCopy() bool { return len(r.Mechanisms()) > 0 }

// Mechanisms lists the single-copy mechanisms the ranges name, in order of
// first appearance.
func (r *Route) Mechanisms() []string {
	var out []string
	for _, s := range r.single {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// CopyModes are the copy directions the ranges give their single-copy
// transports, as those transports' options (cma.mode=push): each
// mechanism's own direction, which a range without a mode keeps.
func (r *Route) CopyModes() transports.Options {
	o := transports.Options{}
	for _, rg := range r.Decision.Ranges {
		if rg.Mode != "" {
			o[rg.Transport+".mode"] = rg.Mode
		}
	}
	return o
}

// Rendezvous reports whether an n-byte message goes by single copy.
func (r *Route) Rendezvous(n int) bool { return r.MechanismFor(n) != "" }

// MechanismFor is the single-copy mechanism of an n-byte message's range
// ("" for none).
func (r *Route) MechanismFor(n int) string {
	if i := r.rangeOf(n); i >= 0 {
		return r.single[i]
	}
	return ""
}

// rangeOf is the index of the range that carries n bytes, -1 for none: the
// last one starting at or below n. A scan from the top, not a binary
// search: a profile has a handful of ranges, and the engine asks of every
// message above the eager limit (BenchmarkRouteRendezvous).
func (r *Route) rangeOf(n int) int {
	i := len(r.mins) - 1
	for i >= 0 && r.mins[i] > n {
		i--
	}
	return i
}

func init() {
	transports.Register(&transports.Driver{
		Name:    "auto",
		Options: []*transports.OptionSet{Options},
		SharedBytes: func(size int, o transports.Options) (int, error) {
			r, err := Load(o)
			if err != nil {
				return 0, err
			}
			if r.Locality == profile.Internode {
				return 0, nil
			}
			return r.SM.JobBytes(size)
		},
		New:   New,
		Check: Check,
	})
}

// locality is the decision locality for a job: the option's, or the
// pair's from the ranks' hosts. A job with peers on this node and on
// others is not routed: one transport carries a selector's messages.
func locality(env transports.Env) (string, error) {
	if loc := env.Options[KeyLocality]; loc != "" {
		return loc, nil
	}
	same, other := 0, 0
	for p := range env.Size {
		switch {
		case p == env.Rank:
		case env.SameHost(env.Rank, p):
			same++
		default:
			other++
		}
	}
	switch {
	case other == 0:
		return profile.Intranode, nil
	case same == 0:
		return profile.Internode, nil
	}
	return "", &sys.NotSupportedError{What: "transport auto", Reason: fmt.Sprintf("rank %d has peers on its node and on others: a selector routes one locality", env.Rank)}
}

// withLocality returns env with auto.locality set to the job's.
func withLocality(env transports.Env) (transports.Env, error) {
	loc, err := locality(env)
	if err != nil {
		return env, err
	}
	env.Options = env.Options.With(transports.Options{KeyLocality: loc})
	return env, nil
}

// New builds the selector inside a rank.
func New(env transports.Env) (transports.Transport, error) {
	env, err := withLocality(env)
	if err != nil {
		return nil, err
	}
	r, err := Load(env.Options)
	if err != nil {
		return nil, err
	}
	prov := hostinfo.Collect("/")
	host := prov.Host
	if len(env.Hosts) > 0 {
		host = env.Hosts[env.Rank] // the node's name in the job, which the profile's scope was built from
	}
	if err := r.Profile.Applies(host, prov.CPUModel, prov.Cores); err != nil {
		return nil, fmt.Errorf("profile %s: %w", r.Profile.Path(), err)
	}
	if r.Locality == profile.Internode {
		return newInternode(env, r)
	}
	if !r.UsesSingleCopy() {
		return sm.New(env, r.SM, nil, "auto")
	}
	env.Options = r.CopyModes().With(env.Options) // the job's own --opt wins
	single, err := newSingle(env, r)
	if err != nil {
		return nil, err
	}
	ep, err := sm.New(env, r.SM, single, "auto")
	if err != nil {
		single.close()
		return nil, err
	}
	if len(single.closers) == 0 && len(single.invs) == 0 {
		return ep, nil // cma: the endpoint itself, as before
	}
	return &local{Endpoint: ep, single: single}, nil
}

// Check proves single copy works between the ranks when the profile uses it.
func Check(t transports.Transport, env transports.Env) error {
	env, err := withLocality(env)
	if err != nil {
		return err
	}
	r, err := Load(env.Options)
	if err != nil {
		return err
	}
	if r.Locality == profile.Internode {
		d, _ := transports.Lookup(r.Decision.Ranges[0].Transport)
		if d == nil || d.Check == nil {
			return nil
		}
		return d.Check(t.(*routed).Transport, env)
	}
	for _, name := range r.Mechanisms() {
		m, ok := sm.LookupMechanism(name)
		if !ok || m.Check == nil {
			continue
		}
		if err := m.Check(t, env); err != nil {
			return err
		}
	}
	return nil
}

// routed is the inter-node transport the profile names, built with the
// decision's options; it answers to the name auto.
type routed struct{ transports.Transport }

func (routed) Name() string { return "auto" }

// Invalidate passes an allocator's release on to the routed transport when
// it keeps registrations (ib), so a hook on auto reaches it.
func (r *routed) Invalidate(addr uintptr, n int) {
	if inv, ok := r.Transport.(transports.Invalidator); ok {
		inv.Invalidate(addr, n)
	}
}

// newInternode builds the decision's transport for a pair on two nodes.
// Options given to the job (--opt) win over the profile's.
func newInternode(env transports.Env, r *Route) (transports.Transport, error) {
	name := r.Decision.Ranges[0].Transport
	d, err := transports.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("profile %s: decisions.internode: %w", r.Profile.Path(), err)
	}
	if !env.MultiHost() {
		return nil, fmt.Errorf("profile %s: auto.locality internode, but the ranks share a node", r.Profile.Path())
	}
	mine := transports.Options{}
	for k, v := range env.Options {
		if !strings.HasPrefix(k, "auto.") {
			mine[k] = v
		}
	}
	env.Options = transports.Options(r.Decision.TransportOptions()).With(mine)
	t, err := d.New(env)
	if err != nil {
		return nil, err
	}
	return &routed{t}, nil
}

// LaunchOptions are what a launching process that loaded the profile p
// from path passes to the ranks of a job running auto: the path, the hash
// it loaded and the GOTUNE_ overrides it applied (when any), which Load
// holds each rank's own loading to. The ranks inherit the launcher's
// environment, so the overrides apply there too.
func LaunchOptions(path string, p *profile.Profile) transports.Options {
	o := transports.Options{KeyProfile: path, KeyHash: p.Hash}
	if ov := Overrides(p); ov != "" {
		o[KeyOverrides] = ov
	}
	return o
}

// Overrides is the canonical form of a loaded profile's environment
// overrides, which the launching process passes as auto.overrides.
func Overrides(p *profile.Profile) string {
	o := slices.Clone(p.Overrides)
	slices.Sort(o)
	return strings.Join(o, ";")
}
