package msgengine

import (
	"errors"
	"strings"
	"testing"

	"github.com/gotune/gotune/transports"
)

// ringT is a transports.Transport that is not the fake, for Check.
type ringT struct{ transports.Transport }

func TestCheck(t *testing.T) {
	called := 0
	ring := func(*fake, transports.Env) error { called++; return nil }
	for _, c := range []struct {
		name string
		tr   transports.Transport
		size int
		want string // the error; "" for none
		runs int
	}{
		{"tcp", nil, 1, "", 0},
		{"tcp", ringT{}, 2, "tcp check: not a tcp transport", 0},
		{"ib", ringT{}, 2, "ib check: not an ib transport", 0},
	} {
		called = 0
		err := Check(c.name, c.tr, transports.Env{Size: c.size}, ring)
		if (err == nil) != (c.want == "") || (err != nil && err.Error() != c.want) || called != c.runs {
			t.Errorf("%s on %d ranks: %v after %d checks, want %q after %d", c.name, c.size, err, called, c.want, c.runs)
		}
	}
}

func TestRing(t *testing.T) {
	// Rank 1 of 3: sends to 2, receives from 0.
	f := newFake(1, 3, 8)
	f.steps = []func(){func() {
		f.e.Finish(f.started[0], nil)
		f.arrive(0, 0, "ring")
	}}
	in := make([]byte, 4)
	prev, err := f.e.Ring(transports.Env{Rank: 1, Size: 3}, []byte("abcd"), in)
	if err != nil || prev != 0 || string(in) != "ring" || f.started[0].Rank != 2 {
		t.Errorf("Ring: prev %d, %q, %v", prev, in, err)
	}
	// Failed pairs: the error names the check.
	f.e.Fail(f.peers[0], errors.New("gone"))
	f.e.Fail(f.peers[2], errors.New("gone"))
	if _, err := f.e.Ring(transports.Env{Rank: 1, Size: 3}, nil, nil); err == nil || !strings.HasPrefix(err.Error(), "fake check: ") {
		t.Errorf("Ring over a failed pair: %v", err)
	}
	if _, err := f.e.Ring(transports.Env{Rank: 1, Size: 1}, nil, nil); err == nil {
		t.Error("Ring in a job of one")
	}
}

func TestDriverAndEagerOption(t *testing.T) {
	bad := errors.New("bad option")
	parse := func(o transports.Options) (int, error) {
		if o["x.eager"] == "no" {
			return 0, bad
		}
		return 1, nil
	}
	d := Driver("x", &transports.OptionSet{Name: "x"}, parse, nil, nil)
	if d.Name != "x" || len(d.Options) != 1 || d.Options[0].Name != "x" {
		t.Errorf("driver %+v", d)
	}
	for _, c := range []struct {
		opts transports.Options
		err  error
	}{{nil, nil}, {transports.Options{"x.eager": "no"}, bad}} {
		if n, err := d.SharedBytes(1<<20, c.opts); n != 0 || err != c.err {
			t.Errorf("SharedBytes(%v): %d, %v; want 0, %v", c.opts, n, err, c.err)
		}
	}
	o := EagerOption("x", "4K", "larger ones wait")
	if want := (transports.Option{Key: "x.eager", Type: "size", Default: "4K", Help: "eager limit: larger ones wait"}); o != want {
		t.Errorf("%+v, want %+v", o, want)
	}
}
