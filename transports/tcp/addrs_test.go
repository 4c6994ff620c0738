package tcp

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports"
)

// addrsRank: start the transport (its check is a ring exchange over the
// connections) and say where this rank listens and what every rank
// published; or, when it fails to start, why.
func addrsRank(r *launch.Rank) (any, error) {
	t, _, err := open(r)
	if err != nil {
		return addrsResult{Err: err.Error()}, nil
	}
	defer t.Close()
	return addrsResult{Listen: t.Addr(), Addrs: t.addrs}, nil
}

type addrsResult struct {
	Listen string   `json:"listen,omitempty"`
	Addrs  []string `json:"addrs,omitempty"`
	Err    string   `json:"err,omitempty"`
}

// Ranks listen on their bootstrap address (port 0) unless tcp.addr says
// otherwise, and reach each other at what they published through the
// job's allgather. 127.0.0.2 and .3 stand for two hosts' addresses: the
// kernel serves all of 127/8 on loopback, so each is a real, distinct
// listening address here. A rank whose bootstrap address is not on its
// host (192.0.2.1, TEST-NET-1) cannot listen, and its peer fails at once
// with that rank's reason instead of waiting for its connection.
func TestAddresses(t *testing.T) {
	two := []string{"127.0.0.2", "127.0.0.3"}
	cases := []struct {
		name   string
		s      scenario
		listen []string // each rank's listening host (*: a wildcard; Go listens on [::] for 0.0.0.0)
		dial   []string // each rank's published host
		err    []string // each rank's error, in part ("": none)
	}{
		{"one host", scenario{}, []string{"127.0.0.1", "127.0.0.1"}, []string{"127.0.0.1", "127.0.0.1"}, nil},
		{"bootstrap addresses", scenario{Addrs: two}, two, two, nil},
		{"tcp.addr overrides", scenario{Addrs: two, Options: transports.Options{"tcp.addr": "127.0.0.4:0"}}, []string{"127.0.0.4", "127.0.0.4"}, []string{"127.0.0.4", "127.0.0.4"}, nil},
		{"wildcard publishes bootstrap", scenario{Addrs: two, Options: transports.Options{"tcp.addr": "0.0.0.0:0"}}, []string{"*", "*"}, two, nil},
		{"IPv6 bootstrap", scenario{Addrs: []string{"::1", "::1"}}, []string{"::1", "::1"}, []string{"::1", "::1"}, nil},
		{"bootstrap address not here", scenario{Addrs: []string{"127.0.0.2", "192.0.2.1"}}, nil, nil,
			[]string{"tcp: rank 1 has no address: tcp: rank 1 listen on 192.0.2.1:0", "tcp: rank 1 listen on 192.0.2.1:0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := results[addrsResult](t, "tcp-addrs", c.s)
			for r, g := range got {
				if c.err != nil {
					if !strings.Contains(g.Err, c.err[r]) {
						t.Errorf("rank %d: error %q, want %q", r, g.Err, c.err[r])
					}
					continue
				}
				if g.Err != "" {
					t.Fatalf("rank %d: %s", r, g.Err)
				}
				host, _, _ := net.SplitHostPort(g.Listen)
				if host != c.listen[r] && !(c.listen[r] == "*" && net.ParseIP(host).IsUnspecified()) {
					t.Errorf("rank %d listens on %s, want host %s", r, g.Listen, c.listen[r])
				}
				for p, a := range g.Addrs {
					host, port, _ := net.SplitHostPort(a)
					_, lport, _ := net.SplitHostPort(got[p].Listen)
					if host != c.dial[p] || port != lport {
						t.Errorf("rank %d has rank %d at %s; it listens on %s, want host %s", r, p, a, got[p].Listen, c.dial[p])
					}
				}
			}
			t.Logf("%+v", got)
		})
	}
}

// exchange checks what the allgather brings before any rank dials it.
func TestExchange(t *testing.T) {
	cases := []struct {
		name    string
		blobs   [][]byte
		gErr    error
		listen  error
		want    []string
		wantErr string
	}{
		{"ok", [][]byte{[]byte("127.0.0.1:5"), []byte("[::1]:6")}, nil, nil, []string{"127.0.0.1:5", "[::1]:6"}, ""},
		{"a rank could not listen", [][]byte{[]byte("127.0.0.1:5"), []byte("!listen on x: no")}, nil, nil, nil, "tcp: rank 1 has no address: listen on x: no"},
		{"this rank could not listen", [][]byte{[]byte("!mine"), []byte("127.0.0.1:6")}, nil, errors.New("mine"), nil, "mine"},
		{"not host:port", [][]byte{[]byte("127.0.0.1:5"), []byte("garbage")}, nil, nil, nil, `tcp: rank 1 published "garbage"`},
		{"too long", [][]byte{[]byte("127.0.0.1:5"), bytes.Repeat([]byte("a"), maxAddr+1)}, nil, nil, nil, "rank 1 published an address of 257 bytes"},
		{"too few", [][]byte{[]byte("127.0.0.1:5")}, nil, nil, nil, "1 for 2 ranks"},
		{"allgather fails", nil, errors.New("launcher gone"), nil, nil, "tcp: rank 0 exchanging addresses: launcher gone"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var sent []byte
			env := transports.Env{Rank: 0, Size: 2, AllGather: func(b []byte) ([][]byte, error) { sent = b; return c.blobs, c.gErr }}
			got, err := exchange(env, "127.0.0.1:5", c.listen)
			if c.wantErr == "" {
				if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Errorf("got %q, %v; want %q", got, err, c.want)
				}
			} else if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("got %q, %v; want error %q", got, err, c.wantErr)
			}
			if c.listen != nil && string(sent) != "!"+c.listen.Error() {
				t.Errorf("published %q for a failed listen", sent)
			}
		})
	}
}

func TestNoAllGather(t *testing.T) {
	_, err := New(transports.Env{Rank: 0, Size: 2, Token: "x"})
	if err == nil || !strings.Contains(err.Error(), "transports.Env.AllGather") {
		t.Errorf("New without an allgather: %v", err)
	}
}
