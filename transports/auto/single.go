package auto

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// routedCopy is the single copy of an intra-node decision: each message
// goes by the mechanism its size range names (cma, knem, xpmem, as
// registered with sm.RegisterMechanism). Address-based mechanisms (cma,
// xpmem) can move any message, so a receive whose length differs from the
// message's (truncation) may go by another than the sender's range named:
// only speed differs. A handle-based one (knem) is chosen by the sender,
// which exports for it; its handle in the control message then says how
// the receiver copies. Each range copies in its own direction (the
// receiver picks it by the message's size), except that a handle-based
// mechanism keeps one: who exports is decided before the size is known to
// both sides.
type routedCopy struct {
	r       *Route
	mechs   map[string]sm.SingleCopy
	ranged  []sm.SingleCopy // by range index (nil: none), so no message looks a name up
	routes  []sm.Route      // by range index: its direction (RouteFor)
	byAddr  []sm.SingleCopy // the address-based ones, in the ranges' order
	export  sm.Exporter     // at most one handle-based mechanism
	closers []io.Closer
	invs    []transports.Invalidator
}

// newSingle builds the mechanisms r's ranges name.
func newSingle(env transports.Env, r *Route) (*routedCopy, error) {
	c := &routedCopy{r: r, mechs: map[string]sm.SingleCopy{}}
	names := r.Mechanisms()
	for _, name := range names {
		m, ok := sm.LookupMechanism(name)
		if !ok || m.Routed == nil {
			c.close()
			return nil, fmt.Errorf("profile %s: ranges name single-copy transport %q, which this build lacks (have %s)",
				r.Profile.Path(), name, strings.Join(sm.MechanismNames(), ", "))
		}
		want := name
		s, err := m.Routed(env, func(n int) bool { return r.MechanismFor(n) == want })
		if err != nil {
			c.close()
			return nil, fmt.Errorf("auto: %s: %w", name, err)
		}
		c.mechs[name] = s
		if cl, ok := s.(io.Closer); ok {
			c.closers = append(c.closers, cl)
		}
		if inv, ok := s.(transports.Invalidator); ok {
			c.invs = append(c.invs, inv)
		}
		if x, ok := s.(sm.Exporter); ok {
			if c.export != nil {
				c.close()
				return nil, fmt.Errorf("profile %s: ranges name two handle-based single-copy transports (%s and %s)", r.Profile.Path(), c.export.Name(), name)
			}
			if err := oneDirection(r, name, s.Pull()); err != nil {
				c.close()
				return nil, err
			}
			c.export = x
		} else {
			c.byAddr = append(c.byAddr, s)
		}
	}
	c.ranged = make([]sm.SingleCopy, len(r.single))
	c.routes = make([]sm.Route, len(r.single))
	for i, name := range r.single {
		c.ranged[i] = c.mechs[name]
		c.routes[i] = c.direction(i)
	}
	return c, nil
}

// direction is range i's copy direction: its mode, else its mechanism's
// own (pull for a range without single copy).
func (c *routedCopy) direction(i int) sm.Route {
	mode := "pull"
	if s := c.ranged[i]; s != nil {
		mode = transports.Choice(s.Pull(), "pull", "push")
		if _, handles := s.(sm.Exporter); !handles && c.r.modes[i] != "" {
			mode = c.r.modes[i]
		}
	}
	switch mode {
	case "split":
		return sm.RouteSplit
	case "pull":
		return sm.RoutePull
	}
	return sm.RoutePush
}

// at is the mechanism of an n-byte message's range (nil: none).
func (c *routedCopy) at(n int) sm.SingleCopy {
	if i := c.r.rangeOf(n); i >= 0 {
		return c.ranged[i]
	}
	return nil
}

func (c *routedCopy) close() error {
	var errs []error
	for _, cl := range c.closers {
		errs = append(errs, cl.Close())
	}
	return errors.Join(errs...)
}

func (c *routedCopy) Name() string {
	var names []string
	for _, s := range c.r.Mechanisms() {
		names = append(names, s)
	}
	return strings.Join(names, "+")
}

// oneDirection checks that every range of the handle-based mechanism name
// copies in its direction.
func oneDirection(r *Route, name string, pull bool) error {
	want := transports.Choice(pull, "pull", "push")
	for i, mech := range r.single {
		if mech == name && r.modes[i] != "" && r.modes[i] != want {
			return fmt.Errorf("profile %s: %s's ranges copy in two directions (%s at %d bytes, %s elsewhere): a handle-based transport keeps one",
				r.Profile.Path(), name, r.modes[i], r.mins[i], want)
		}
	}
	return nil
}

// Pull says whether a sender exports its buffer (for the receiver to pull
// through the handle): only for a handle-based mechanism that pulls.
func (c *routedCopy) Pull() bool            { return c.export == nil || c.export.Pull() }
func (c *routedCopy) Rendezvous(n int) bool { return c.r.Rendezvous(n) }

// RouteFor is the direction of an n-byte message's range.
func (c *routedCopy) RouteFor(n int, _, _ sm.Place) sm.Route {
	if i := c.r.rangeOf(n); i >= 0 {
		return c.routes[i]
	}
	return sm.RoutePull
}

// Copy moves a message that came without a handle: by its range's
// mechanism when that one is address-based, else by the first that is. A
// split copy's part is half its message, so its length may fall in
// another range: any address-based mechanism moves it alike.
func (c *routedCopy) Copy(pid int, local []byte, at sm.Place, remote uintptr, pull bool) error {
	s := c.at(len(local))
	if _, handles := s.(sm.Exporter); s == nil || handles {
		if len(c.byAddr) == 0 {
			return fmt.Errorf("auto: %d-byte message at %#x of pid %d came without a handle, and %s needs one", len(local), remote, pid, c.Name())
		}
		s = c.byAddr[0]
	}
	return s.Copy(pid, local, at, remote, pull)
}

// Export exports for the handle-based mechanism when the buffer's range
// names it; 0 (no handle) otherwise.
func (c *routedCopy) Export(buf []byte, at sm.Place, writable bool) (uint64, error) {
	if c.export == nil || c.at(len(buf)) != c.export {
		return 0, nil
	}
	return c.export.Export(buf, at, writable)
}

func (c *routedCopy) CopyHandle(pid int, local []byte, at sm.Place, handle uint64, remote uintptr, pull bool) error {
	if c.export == nil {
		return fmt.Errorf("auto: a handle %#x from pid %d, but no handle-based mechanism here", handle, pid)
	}
	return c.export.CopyHandle(pid, local, at, handle, remote, pull)
}

func (c *routedCopy) Release(handle uint64, used bool) {
	if c.export != nil {
		c.export.Release(handle, used)
	}
}

// local is auto's intra-node endpoint when its mechanisms hold a device
// (closed with it) or state about user buffers (Invalidate passes on).
type local struct {
	*sm.Endpoint
	single *routedCopy
}

func (l *local) Close() error { return errors.Join(l.Endpoint.Close(), l.single.close()) }

// Invalidate passes an allocator's release on to the mechanisms that keep
// state about user buffers (knem's cached regions, xpmem's attachments).
func (l *local) Invalidate(addr uintptr, n int) {
	for _, inv := range l.single.invs {
		inv.Invalidate(addr, n)
	}
}
