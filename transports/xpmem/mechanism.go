package xpmem

import (
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// routedCopier is xpmem as auto builds it for a profile's ranges that name
// it: the rank's own segment, board and attachment cache, taking exactly
// the messages route accepts; auto's endpoint closes it and passes
// invalidations on.
type routedCopier struct {
	copier
	route func(n int) bool
}

func (c *routedCopier) Rendezvous(n int) bool { return c.route(n) }
func (c *routedCopier) Close() error          { return c.x.close() }

// Invalidate is Transport.Invalidate (the board's notice, never the cache lock).
func (c *routedCopier) Invalidate(addr uintptr, n int) { (&Transport{x: c.x}).Invalidate(addr, n) }

func init() {
	sm.RegisterMechanism("xpmem", sm.Mechanism{
		Routed: func(env transports.Env, route func(int) bool) (sm.SingleCopy, error) {
			_, p, err := params(env.Options)
			if err != nil {
				return nil, err
			}
			x, err := setup(env, p)
			if err != nil {
				return nil, err
			}
			return &routedCopier{copier: copier{x: x}, route: route}, nil
		},
	})
}
