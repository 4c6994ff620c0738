package profile

import (
	"fmt"
	"maps"
	"path"
	"sort"
	"strings"
)

// FormatVersion is the version of the profile format this package reads and
// writes.
const FormatVersion = 1

// Profile is a tuned, hazard-checked configuration for a set of hosts.
type Profile struct {
	Version     int                            `yaml:"version" mapstructure:"version"`
	Gotune      string                         `yaml:"gotune" mapstructure:"gotune"`   // version of gotune that emitted it
	Created     string                         `yaml:"created" mapstructure:"created"` // RFC 3339
	Scope       Scope                          `yaml:"scope" mapstructure:"scope"`
	Fingerprint Fingerprint                    `yaml:"fingerprint" mapstructure:"fingerprint"`
	Libraries   map[string]string              `yaml:"libraries" mapstructure:"libraries"` // "go": "go1.26.8", "kernel": "6.18.0", "openmpi": "4.1.4", ...
	Evidence    Evidence                       `yaml:"evidence" mapstructure:"evidence"`
	Decisions   map[string]map[string]Decision `yaml:"decisions" mapstructure:"decisions"` // locality ("intranode") → memory pair ("host_host": source_destination) → decision
	Allocator   Allocator                      `yaml:"allocator" mapstructure:"allocator"`
	GPU         *GPU                           `yaml:"gpu,omitempty" mapstructure:"gpu"`       // GPU sweeps only
	Stacks      map[string]Stack               `yaml:"stacks,omitempty" mapstructure:"stacks"` // decisions for the MPI stacks and allocators gotune tunes through themselves, by stack (StackNames); omitted when empty, so a profile without them keeps its hash
	Safety      []Verdict                      `yaml:"safety" mapstructure:"safety"`
	Hash        string                         `yaml:"hash" mapstructure:"hash"` // "sha256:<64 hex>" over the canonical encoding with Hash empty

	// Overrides lists the environment overrides Load applied, as
	// NAME=value, sorted by name. They are not part of the file.
	Overrides []string `yaml:"-" mapstructure:"-"`

	path string // the file Load read it from
}

// Scope says which hosts a profile applies to.
type Scope struct {
	Hosts    []string `yaml:"hosts" mapstructure:"hosts"`         // glob patterns (path.Match) of host names it applies to
	CPUModel string   `yaml:"cpu_model" mapstructure:"cpu_model"` // must equal the host's, when set
	Cores    int      `yaml:"cores" mapstructure:"cores"`         // must equal, when > 0
}

// Fingerprint describes the host the profile was measured on.
type Fingerprint struct {
	Host      string `yaml:"host" mapstructure:"host"`
	CPUModel  string `yaml:"cpu_model" mapstructure:"cpu_model"`
	Cores     int    `yaml:"cores" mapstructure:"cores"`
	NUMANodes int    `yaml:"numa_nodes" mapstructure:"numa_nodes"`
	Kernel    string `yaml:"kernel" mapstructure:"kernel"`
}

// Evidence names the measurements the decisions rest on.
type Evidence struct {
	Run          string `yaml:"run" mapstructure:"run"`                   // run id, e.g. 20261121-131500
	Measurements string `yaml:"measurements" mapstructure:"measurements"` // path of the JSON-lines store, relative to the profile
	Records      int    `yaml:"records" mapstructure:"records"`           // how many measurements the decisions rest on
	Plan         string `yaml:"plan" mapstructure:"plan"`
	// KnownLosses names the sizes where the sweep's verification found a
	// single transport faster than these decisions, settled, and could not
	// mend it; omitted when none (and so from every profile before it).
	KnownLosses []string `yaml:"known_losses,omitempty" mapstructure:"known_losses"`
}

// Decision is the tuned configuration of one locality and memory pair.
type Decision struct {
	Ranges     []Range `yaml:"ranges" mapstructure:"ranges"` // by ascending Min; the first has Min 0; each reaches up to the next's Min-1, the last is unbounded
	EagerLimit int     `yaml:"eager_limit" mapstructure:"eager_limit"`
	FragSize   int     `yaml:"frag_size" mapstructure:"frag_size"`
	FragSlots  int     `yaml:"frag_slots" mapstructure:"frag_slots"`
	FIFODepth  int     `yaml:"fifo_depth" mapstructure:"fifo_depth"`
	// FIFODepthRanks is the ranks per node FIFODepth and the fragment ring
	// were decided for: a job of fewer ranks takes the built-in depth for
	// its count where that is deeper, and the built-in ring's bytes where
	// they are more (sm.Params.DepthRanks). Omitted (0) for a profile of
	// two ranks per node, so profiles without it keep their hash.
	FIFODepthRanks int    `yaml:"fifo_depth_ranks,omitempty" mapstructure:"fifo_depth_ranks"`
	CellSize       int    `yaml:"cell_size" mapstructure:"cell_size"`
	Copy           string `yaml:"copy" mapstructure:"copy"`         // sm copy routine: auto|go|movsb
	Progress       string `yaml:"progress" mapstructure:"progress"` // "poll" or "thread" (may be empty = poll)
	// Park is sm.park, a Go duration ("50us"): how long a message no
	// receive awaits stays in its ring before it is parked, decided with
	// alltoall at the sweep's geometry ranks. Omitted (empty: the built-in)
	// where the sweep did not weigh it, so profiles without it keep their
	// hash.
	Park      string `yaml:"park,omitempty" mapstructure:"park"`
	Footprint string `yaml:"footprint" mapstructure:"footprint"` // human note, e.g. "1.1 MiB per ordered pair; 8 ranks: 62 MiB"
	// Options are the inter-node transport's own settings, named without
	// the transport's prefix ("conns" for tcp.conns; the eager limit
	// included); the sm fields above do not apply between nodes. Omitted
	// when empty, so profiles without them keep their hash.
	Options map[string]string `yaml:"options,omitempty" mapstructure:"options"`
}

// TransportOptions are d's options as the transport reads them
// (prefixed: tcp.conns).
func (d Decision) TransportOptions() map[string]string {
	if len(d.Ranges) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range d.Options {
		out[d.Ranges[0].Transport+"."+k] = v
	}
	return out
}

// Localities of decisions: pairs on one node, and pairs on two.
const (
	Intranode = "intranode"
	Internode = "internode"
)

// HostHost is the memory pair ("source_destination") of host buffers on
// both sides, the one every host sweep decides.
const HostHost = "host_host"

// Range is the transport and protocol for message sizes from Min up to the
// next range's Min-1 (the last range is unbounded).
type Range struct {
	Min       int    `yaml:"min" mapstructure:"min"`             // bytes
	Transport string `yaml:"transport" mapstructure:"transport"` // "sm" | "cma" | "knem" | "xpmem"
	Protocol  string `yaml:"protocol" mapstructure:"protocol"`   // "eager" | "pipeline" | "rendezvous"
	// Mode is the direction of a rendezvous range's single copy, "pull"
	// (the receiver copies), "push" (the sender copies) or, for cma,
	// "split" (each copies half), chosen per range (knem's ranges keep one:
	// its sender exports before the receiver routes). Omitted: the transport's own default, and older profiles
	// keep their hash.
	Mode string `yaml:"mode,omitempty" mapstructure:"mode"`
}

// Allocator is the host buffer allocator's configuration.
type Allocator struct {
	CacheBytes int64  `yaml:"cache_bytes" mapstructure:"cache_bytes"`
	Purge      string `yaml:"purge" mapstructure:"purge"` // immediate | delayed | never
	THP        bool   `yaml:"thp" mapstructure:"thp"`
}

// GPU is what a GPU sweep decided: how device messages move over the
// cudaipc transport and where GPU message buffers come from.
type GPU struct {
	GPUs            string   `yaml:"gpus" mapstructure:"gpus"`                         // ranks' devices ("0,1")
	IPCThreshold    int      `yaml:"ipc_threshold" mapstructure:"ipc_threshold"`       // device messages from this size go by CUDA IPC; smaller ones are staged
	Staging         string   `yaml:"staging" mapstructure:"staging"`                   // async | sync
	PinnedThreshold int      `yaml:"pinned_threshold" mapstructure:"pinned_threshold"` // pinned host sends from this size are pushed into device receives
	Copy            string   `yaml:"copy,omitempty" mapstructure:"copy"`               // ce | sm: how single copies between device buffers move (omitted: ce)
	Completion      string   `yaml:"completion,omitempty" mapstructure:"completion"`   // event | flag | sync: how a single copy's end reaches both ranks (omitted: event)
	Relay           int      `yaml:"relay,omitempty" mapstructure:"relay"`             // largest device-to-device copy the resident relay block moves (omitted: no relay)
	IPCCache        int      `yaml:"ipc_cache,omitempty" mapstructure:"ipc_cache"`     // opened peer allocations kept per peer (omitted: the transport's default)
	Allocator       string   `yaml:"allocator" mapstructure:"allocator"`               // plain | worker | pool (probe H2's verdicts)
	Avoided         []string `yaml:"avoided,omitempty" mapstructure:"avoided"`         // candidate paths that stalled beside a GPU kernel
}

// Stack is what a sweep through one MPI stack or allocator decided, in the
// stack's own terms, so that package profile/native can write the stack's
// config file without knowing how the values were found.
type Stack struct {
	// Version is the stack's version the decisions were measured on, e.g. "4.1.4".
	Version string `yaml:"version" mapstructure:"version"`
	// Params are the stack's own parameter names, lower-case and without the
	// stack's prefix (Open MPI btl_vader_eager_limit; MPICH
	// ch4_ipc_cma_p2p_threshold for MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD; UCX
	// rndv_thresh for UCX_RNDV_THRESH; mimalloc purge_delay for
	// MIMALLOC_PURGE_DELAY; NCCL buffsize for NCCL_BUFFSIZE), with values
	// as the stack reads them. Keys are
	// lower-case because the loader refuses any other.
	Params map[string]string `yaml:"params" mapstructure:"params"`
	// Evidence says, per parameter, what its value rests on, e.g. "bw 4K-16M
	// geomean 1.42x over the default 'cma' (8 interleaved rounds, U test
	// settled at 11 of 13 sizes)".
	Evidence map[string]string `yaml:"evidence,omitempty" mapstructure:"evidence"`
	// Confirmed says what the whole file gains against the stack's
	// defaults as users load it (geomean, the sizes faster settled, 8-byte
	// latency); omitted when not confirmed, so older profiles keep their hash.
	Confirmed string `yaml:"confirmed,omitempty" mapstructure:"confirmed"`
}

// StackNames are the stacks a profile may hold decisions for.
var StackNames = []string{"openmpi", "mpich", "ucx", "mimalloc", "nccl"}

// Verdict is the outcome of a hazard probe on the configuration.
type Verdict struct {
	Probe   string `yaml:"probe" mapstructure:"probe"`     // H1, H3, ...
	Config  string `yaml:"config" mapstructure:"config"`   // digest of the configuration probed
	Outcome string `yaml:"outcome" mapstructure:"outcome"` // "passed" (a profile only ever carries passed verdicts)
	Detail  string `yaml:"detail,omitempty" mapstructure:"detail"`
}

// Path is the file the profile was loaded from ("" if it was not loaded).
func (p *Profile) Path() string { return p.path }

// Route returns the range that a message of size bytes between peers of this
// locality and memory pair falls in.
func (p *Profile) Route(locality, pair string, size int) (Range, error) {
	d, ok := p.Decisions[locality][pair]
	if !ok {
		return Range{}, fmt.Errorf("no decision for decisions.%s.%s", locality, pair)
	}
	if size < 0 {
		return Range{}, fmt.Errorf("negative message size %d", size)
	}
	// The first range whose Min is above size, less one.
	i := sort.Search(len(d.Ranges), func(i int) bool { return d.Ranges[i].Min > size })
	if i == 0 {
		return Range{}, fmt.Errorf("decisions.%s.%s: no range holds size %d", locality, pair, size)
	}
	return d.Ranges[i-1], nil
}

// SendsAlike reports whether p and o move a size-byte message between
// peers of this locality and memory pair the same way: the same range
// (transport, protocol, direction) under the same channel and transport
// settings. Two profiles that do run the same code at that size, so what
// a measurement tells them apart by there is its own noise.
func (p *Profile) SendsAlike(o *Profile, locality, pair string, size int) bool {
	dp, okP := p.Decisions[locality][pair]
	do, okO := o.Decisions[locality][pair]
	if !okP || !okO {
		return false
	}
	rp, errP := p.Route(locality, pair, size)
	ro, errO := o.Route(locality, pair, size)
	if errP != nil || errO != nil {
		return false
	}
	rp.Min, ro.Min = 0, 0 // where a range begins does not change how it sends
	return rp == ro && dp.EagerLimit == do.EagerLimit && dp.FragSize == do.FragSize && dp.FragSlots == do.FragSlots &&
		dp.FIFODepth == do.FIFODepth && dp.FIFODepthRanks == do.FIFODepthRanks && dp.CellSize == do.CellSize && dp.Copy == do.Copy &&
		progressOf(dp) == progressOf(do) && dp.Park == do.Park && maps.Equal(dp.Options, do.Options)
}

// progressOf is d's progress mode, "" read as the poll it means.
func progressOf(d Decision) string {
	if d.Progress == "" {
		return "poll"
	}
	return d.Progress
}

// Applies reports whether the profile applies to a host with this name, CPU
// model and number of cores: nil if it does, or why not.
func (p *Profile) Applies(host, cpuModel string, cores int) error {
	matched := false
	for _, pattern := range p.Scope.Hosts {
		ok, err := path.Match(pattern, host)
		if err != nil {
			return fmt.Errorf("scope.hosts: pattern %q: %w", pattern, err)
		}
		if ok {
			matched = true
			break
		}
	}
	if !matched {
		return fmt.Errorf("host %q matches none of scope.hosts [%s]", host, strings.Join(p.Scope.Hosts, ", "))
	}
	if p.Scope.CPUModel != "" && p.Scope.CPUModel != cpuModel {
		return fmt.Errorf("CPU model %q is not scope.cpu_model %q", cpuModel, p.Scope.CPUModel)
	}
	if p.Scope.Cores > 0 && p.Scope.Cores != cores {
		return fmt.Errorf("%d cores, scope.cores is %d", cores, p.Scope.Cores)
	}
	return nil
}
