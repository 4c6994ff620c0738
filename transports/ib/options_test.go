package ib

import (
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

// Options is ParseParams' inverse: what it writes reads back the same.
func TestOptionsRoundTrip(t *testing.T) {
	testutil.RoundTrip(t, []Params{
		{GID: -1, Eager: DefaultEager, Credits: DefaultCredits, Depth: DefaultDepth, Rndv: "read", Wait: "poll"},
		{Dev: "mlx5_0", Port: 2, GID: 3, MTU: 4096, Eager: 0, Credits: 1, Depth: 2, Rndv: "write", Wait: "event"},
		{Dev: "rxe0", Port: 1, GID: -1, MTU: 1024, Eager: 1 << 20, Credits: 4096, Depth: 1 << 15, Rndv: "read", Wait: "poll"},
	}, Params.Options, ParseParams)
}
