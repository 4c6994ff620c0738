package verbs

import "fmt"

// PortState is a port's logical state (enum ibv_port_state).
type PortState int

var portStates = []string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}

func (s PortState) String() string {
	if int(s) >= 0 && int(s) < len(portStates) {
		return portStates[s]
	}
	return fmt.Sprintf("state %d", int(s))
}

// Active is the state a port moves traffic in.
const Active PortState = 4

// MTU is an IB path MTU code (enum ibv_mtu: 1 is 256 bytes ... 5 is 4096).
type MTU int

// Bytes is the MTU in bytes (0 for an unknown code).
func (m MTU) Bytes() int {
	if m < 1 || m > 5 {
		return 0
	}
	return 128 << m
}

// MTUOf is the code of an MTU in bytes (256, 512, 1024, 2048, 4096).
func MTUOf(bytes int) (MTU, error) {
	for m := MTU(1); m <= 5; m++ {
		if m.Bytes() == bytes {
			return m, nil
		}
	}
	return 0, fmt.Errorf("MTU %d: want 256, 512, 1024, 2048 or 4096", bytes)
}

func (g GID) String() string {
	var s []byte
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			s = append(s, ':')
		}
		s = fmt.Appendf(s, "%02x%02x", g[i], g[i+1])
	}
	return string(s)
}

// IsZero reports an empty table entry.
func (g GID) IsZero() bool { return g == GID{} }

// IPv4 returns the IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d).
func (g GID) IPv4() (string, bool) {
	for _, b := range g[:10] {
		if b != 0 {
			return "", false
		}
	}
	if g[10] != 0xff || g[11] != 0xff {
		return "", false
	}
	return fmt.Sprintf("%d.%d.%d.%d", g[12], g[13], g[14], g[15]), true
}

// LinkLocal reports an fe80::/64 GID (the default GID of a port).
func (g GID) LinkLocal() bool { return g[0] == 0xfe && g[1] == 0x80 }
