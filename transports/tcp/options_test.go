package tcp

import (
	"testing"

	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/transporttest"
)

// Each documented default is the value ParseParams uses when the option is
// not given (docs/options.md is generated from Options).
func TestOptionDefaultsAreTheBuiltIns(t *testing.T) {
	if want := transporttest.DefaultsAreBuiltIns(t, Options, true, ParseParams); want != (Params{Eager: 64 << 10, NoDelay: true, Conns: 1, Addr: AutoAddr}) {
		t.Errorf("defaults: %+v", want)
	}
}

func TestParseParams(t *testing.T) {
	cases := []struct {
		opts  transports.Options
		want  string // error text; "" for none
		check func(Params) bool
	}{
		{transports.Options{"tcp.eager": "16K", "tcp.sndbuf": "4M", "tcp.rcvbuf": "2M"}, "", func(p Params) bool { return p.Eager == 16<<10 && p.SndBuf == 4<<20 && p.RcvBuf == 2<<20 }},
		{transports.Options{"tcp.nodelay": "off"}, "", func(p Params) bool { return !p.NoDelay }},
		{transports.Options{"tcp.conns": "4", "tcp.zerocopy": "64K", "tcp.busypoll": "50"}, "", func(p Params) bool { return p.Conns == 4 && p.ZeroCopy == 64<<10 && p.BusyPoll == 50 }},
		{transports.Options{"tcp.addr": "0.0.0.0:7000"}, "", func(p Params) bool { return p.Addr == "0.0.0.0:7000" }},
		{transports.Options{"tcp.nodelay": "yes"}, `tcp.nodelay="yes"`, nil},
		{transports.Options{"tcp.conns": "0"}, "tcp.conns=0", nil},
		{transports.Options{"tcp.conns": "65"}, "tcp.conns=65", nil},
		{transports.Options{"tcp.eager": "lots"}, `tcp.eager="lots"`, nil},
		{transports.Options{"tcp.busypoll": "-1"}, `tcp.busypoll="-1"`, nil},
		{transports.Options{"tcp.addr": "localhost"}, `tcp.addr="localhost"`, nil},
	}
	for _, c := range cases {
		p, err := transporttest.ParseError(t, ParseParams, c.opts, c.want)
		if err == nil && c.check != nil && !c.check(p) {
			t.Errorf("%v: %+v", c.opts, p)
		}
	}
}

// Options is ParseParams' inverse: what it writes reads back the same.
func TestOptionsRoundTrip(t *testing.T) {
	testutil.RoundTrip(t, []Params{
		{Eager: DefaultEager, NoDelay: true, Conns: 1, Addr: AutoAddr},
		{Eager: 0, SndBuf: 4 << 20, RcvBuf: 6 << 20, NoDelay: false, Conns: 4, BusyPoll: 50, ZeroCopy: 64 << 10, Addr: "10.0.0.1:0"},
		{Eager: 1 << 20, NoDelay: true, Conns: maxConns, Addr: "[::1]:5000"},
	}, Params.Options, ParseParams)
}
