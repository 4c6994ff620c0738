package ib

import "testing"

// Options is ParseParams' inverse: what it writes reads back the same.
func TestOptionsRoundTrip(t *testing.T) {
	builtin, err := ParseParams(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Params{
		builtin,
		{Dev: "mlx5_0", Port: 2, GID: 3, MTU: 4096, Eager: 0, Credits: 1, Depth: 2, Rndv: "write", Wait: "event"},
		{Dev: "rxe0", Port: 1, GID: -1, MTU: 1024, Eager: 1 << 20, Credits: 4096, Depth: 1 << 15, Rndv: "read", Wait: "poll"},
	} {
		got, err := ParseParams(p.Options())
		if err != nil || got != p {
			t.Errorf("ParseParams(%v) = %+v, %v; want %+v", p.Options(), got, err, p)
		}
	}
}
