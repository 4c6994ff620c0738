package sm

import (
	"sort"
	"sync"

	"github.com/gotune/gotune/transports"
)

// Mechanism is a single-copy mechanism as a transport that routes by
// message size (auto) builds it: the name a profile's range gives it
// (cma, knem, xpmem) and how to make it for a rank.
type Mechanism struct {
	// Routed makes the mechanism from env (its options included) taking
	// exactly the messages route accepts. What it returns may be an
	// io.Closer (a device to close with the transport) and a
	// transports.Invalidator (state about user buffers).
	Routed func(env transports.Env, route func(n int) bool) (SingleCopy, error)
	// Check proves, inside a running job, that the mechanism works
	// between the ranks (nil), or says why not (ErrNotSupported).
	Check func(t transports.Transport, env transports.Env) error
}

var (
	mechMu     sync.RWMutex
	mechanisms = map[string]Mechanism{}
)

// RegisterMechanism makes a mechanism known by name; it panics on a
// duplicate.
func RegisterMechanism(name string, m Mechanism) {
	mechMu.Lock()
	defer mechMu.Unlock()
	if _, dup := mechanisms[name]; dup {
		panic("sm: duplicate single-copy mechanism " + name)
	}
	mechanisms[name] = m
}

// LookupMechanism finds a registered mechanism.
func LookupMechanism(name string) (Mechanism, bool) {
	mechMu.RLock()
	defer mechMu.RUnlock()
	m, ok := mechanisms[name]
	return m, ok
}

// MechanismNames lists the registered mechanisms, sorted.
func MechanismNames() []string {
	mechMu.RLock()
	defer mechMu.RUnlock()
	var names []string
	for n := range mechanisms {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
