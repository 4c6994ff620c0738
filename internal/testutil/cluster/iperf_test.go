package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/testutil"
)

// iperf3 between two hosts goes over the bridge, on one host over loopback.
func TestIperf3(t *testing.T) {
	c := Hosts(t, 2)
	testutil.SkipUnless(t, "netns", IperfAvailable())
	h1, h2 := c.Hosts[0].Name, c.Hosts[1].Name
	for _, tc := range []struct {
		server, client, target string
	}{
		{h1, h2, c.Hosts[0].Addr},
		{h2, "root", c.Hosts[1].Addr},
		{h1, h1, "127.0.0.1"},
	} {
		t.Run(tc.client+" to "+tc.server, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r, err := c.Iperf3(ctx, tc.server, tc.client, 1)
			if err != nil {
				t.Fatal(err)
			}
			if r.Target != tc.target || r.BitsPerSecond <= 0 || r.Seconds <= 0 {
				t.Errorf("%+v: want target %s and a bandwidth", r, tc.target)
			}
		})
	}
	if _, err := c.Iperf3(context.Background(), "nowhere", h1, 1); err == nil || !strings.Contains(err.Error(), `no host "nowhere"`) {
		t.Errorf("unknown server: %v", err)
	}
}

// iperf3 --json outputs of iperf3 3.12 (Debian 12) on this VM: a 1-second
// loopback run, and a refused connection.
func TestIperfParse(t *testing.T) {
	for _, tc := range []struct {
		file, err string
		bps       float64
		retr      int
	}{
		{"iperf3-loopback.json", "", 12907541207.37838, 7},
		{"iperf3-refused.json", "iperf3: unable to connect to server: Connection refused", 0, 0},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		var r Iperf
		err = r.parse(b)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: %v, want %q", tc.file, err, tc.err)
			}
			continue
		}
		if err != nil || r.BitsPerSecond != tc.bps || r.Retransmits != tc.retr {
			t.Errorf("%s: %+v, %v; want %v bit/s, %d retransmits", tc.file, r, err, tc.bps, tc.retr)
		}
	}
	var r Iperf
	if err := r.parse([]byte(`{"end":{}}`)); err == nil {
		t.Error("no totals: no error")
	}
}
