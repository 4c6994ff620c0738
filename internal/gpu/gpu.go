package gpu

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gotune/gotune/internal/sys"
)

// ErrNotSupported is matched (errors.Is) by every error that means "no NVIDIA
// GPU can be queried here": no NVML library, no driver, no permission. It is
// sys.ErrNotSupported, so callers that already test for that one need nothing
// more.
var ErrNotSupported = sys.ErrNotSupported

// Source is what gotune needs from NVML. Devices are numbered 0..Count()-1 in
// NVML's order (the order nvidia-smi prints).
type Source interface {
	// Count is the number of GPUs.
	Count() (int, error)
	// Device returns GPU i's identity, MIG mode and the affinity the source
	// itself knows (CPUs nil and NUMANode -1 when it knows none).
	Device(i int) (DeviceInfo, error)
	// NVLinks returns GPU i's active NVLinks and what each one reaches.
	NVLinks(i int) ([]NVLink, error)
	// Link returns how GPUs i and j (i < j) are connected over PCIe/SMP and
	// whether peer-to-peer access between them works.
	Link(i, j int) (LinkInfo, error)
}

// DeviceInfo identifies one GPU.
type DeviceInfo struct {
	Index    int     `json:"index"`
	Name     string  `json:"name"`
	UUID     string  `json:"uuid"`
	BusID    string  `json:"bus_id"` // normalised: 0000:18:00.0
	MIG      MIGMode `json:"mig"`
	CPUs     CPUList `json:"cpus"`      // CPUs local to the GPU; empty if unknown
	NUMANode int     `json:"numa_node"` // the GPU's NUMA node; -1 if none or unknown
}

// NVLink is one active NVLink of a GPU.
type NVLink struct {
	Link   int        // the link number, 0..NVLINK_MAX_LINKS-1
	Remote string     // normalised PCI bus id of the far end ("" if unknown)
	Type   RemoteType // what the far end is
}

// RemoteType is what the far end of an NVLink is.
type RemoteType int

// The far ends of an NVLink.
const (
	RemoteUnknown RemoteType = iota // the source could not tell
	RemoteGPU
	RemoteSwitch // an NVSwitch: the link reaches every GPU on the fabric
	RemoteCPU    // e.g. an IBM NPU
)

// LinkInfo is how two GPUs reach each other apart from NVLink.
type LinkInfo struct {
	Ancestor Level `json:"ancestor"` // their closest common ancestor
	P2P      P2P   `json:"p2p"`
}

// P2P is the peer-to-peer status of a pair for each capability NVML reports.
type P2P struct {
	Read   P2PStatus `json:"read"`
	Write  P2PStatus `json:"write"`
	NVLink P2PStatus `json:"nvlink"`
}

// Level is the closest common ancestor of two GPUs in the PCIe/SMP hierarchy,
// nearest first. Its names are nvidia-smi topo -m's.
type Level int

// Levels, from nearest to farthest; LevelUnknown sorts after all of them.
const (
	LevelUnknown    Level = iota // N/A: the source could not tell
	LevelInternal                // INT: on the same board
	LevelSingle                  // PIX: at most one PCIe switch between them
	LevelMultiple                // PXB: several PCIe switches, no host bridge
	LevelHostBridge              // PHB: a PCIe host bridge
	LevelNode                    // NODE: host bridges within one NUMA node
	LevelSystem                  // SYS: the SMP interconnect between NUMA nodes
)

var (
	levelNames = [...]string{"N/A", "INT", "PIX", "PXB", "PHB", "NODE", "SYS"}
	levels     = enum[Level]{typ: "Level", bad: "level", what: "topology level", names: levelNames[:]}
)

func (l Level) String() string { return levels.name(l) }

// rank orders levels by distance, unknown last.
func (l Level) rank() int {
	if l == LevelUnknown {
		return len(levelNames)
	}
	return int(l)
}

// MarshalText writes the nvidia-smi name.
func (l Level) MarshalText() ([]byte, error) { return levels.marshal(l) }

// UnmarshalText reads the nvidia-smi name.
func (l *Level) UnmarshalText(b []byte) error { return levels.unmarshal(l, b) }

// P2PStatus says whether a peer-to-peer capability works between two GPUs.
// Its names are nvidia-smi topo -p2p's.
type P2PStatus int

// Peer-to-peer statuses. The zero value is unknown.
const (
	P2PUnknown              P2PStatus = iota // U
	P2POK                                    // OK
	P2PChipsetNotSupported                   // CNS
	P2PGPUNotSupported                       // GNS
	P2PTopologyNotSupported                  // TNS
	P2PDisabledByRegkey                      // DRK: disabled by a driver registry key
	P2PNotSupported                          // NS
)

var p2pStatuses = enum[P2PStatus]{typ: "P2PStatus", bad: "P2P status", what: "P2P status",
	names: []string{"U", "OK", "CNS", "GNS", "TNS", "DRK", "NS"}}

func (s P2PStatus) String() string { return p2pStatuses.name(s) }

// MarshalText writes the nvidia-smi name.
func (s P2PStatus) MarshalText() ([]byte, error) { return p2pStatuses.marshal(s) }

// UnmarshalText reads the nvidia-smi name.
func (s *P2PStatus) UnmarshalText(b []byte) error { return p2pStatuses.unmarshal(s, b) }

// MIGMode is a GPU's current Multi-Instance GPU mode.
type MIGMode int

// MIG modes. The zero value is unsupported (GPUs before A100).
const (
	MIGUnsupported MIGMode = iota
	MIGDisabled
	MIGEnabled
)

var migModes = enum[MIGMode]{typ: "MIGMode", bad: "MIG mode", what: "MIG mode", names: []string{"unsupported", "disabled", "enabled"}}

func (m MIGMode) String() string { return migModes.name(m) }

// MarshalText writes unsupported, disabled or enabled.
func (m MIGMode) MarshalText() ([]byte, error) { return migModes.marshal(m) }

// UnmarshalText reads unsupported, disabled or enabled.
func (m *MIGMode) UnmarshalText(b []byte) error { return migModes.unmarshal(m, b) }

// enum names the values of an enumeration, by value: String, MarshalText
// and UnmarshalText of its type are its methods.
type enum[E ~int] struct {
	typ   string // the Go type, for the String of a value without a name
	bad   string // a value, for MarshalText's error
	what  string // a name, for UnmarshalText's error
	names []string
}

func (n enum[E]) name(e E) string {
	if e < 0 || int(e) >= len(n.names) {
		return n.typ + "(" + strconv.Itoa(int(e)) + ")"
	}
	return n.names[e]
}

func (n enum[E]) marshal(e E) ([]byte, error) {
	if e < 0 || int(e) >= len(n.names) {
		return nil, fmt.Errorf("gpu: bad %s %d", n.bad, int(e))
	}
	return []byte(n.names[e]), nil
}

func (n enum[E]) unmarshal(e *E, b []byte) error {
	i, err := lookup(n.names, string(b), n.what)
	*e = E(i)
	return err
}

func lookup(names []string, s, what string) (int, error) {
	for i, n := range names {
		if n == s {
			return i, nil
		}
	}
	return 0, fmt.Errorf("gpu: unknown %s %q: want one of %s", what, s, strings.Join(names, ", "))
}
