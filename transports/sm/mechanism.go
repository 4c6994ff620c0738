package sm

import (
	"github.com/gotune/gotune/internal/registry"
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

var mechanisms = registry.New[Mechanism]("sm: duplicate single-copy mechanism ")

// RegisterMechanism makes a mechanism known by name; it panics on a
// duplicate.
func RegisterMechanism(name string, m Mechanism) { mechanisms.Register(name, m) }

// LookupMechanism finds a registered mechanism.
func LookupMechanism(name string) (Mechanism, bool) { return mechanisms.Lookup(name) }

// RouteBySize is a copier's Rendezvous rule: route's answer when it has
// one (a profile's ranges), else whether n reaches threshold.
func RouteBySize(route func(n int) bool, threshold, n int) bool {
	if route != nil {
		return route(n)
	}
	return n >= threshold
}

// MechanismNames lists the registered mechanisms, sorted.
func MechanismNames() []string { return mechanisms.Names() }
