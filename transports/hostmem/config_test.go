package hostmem

import (
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/transporttest"
)

func TestParseConfig(t *testing.T) {
	cases := []struct {
		opts transports.Options
		want Config
		err  string // substring of the error; "" for none
	}{
		{nil, DefaultConfig(), ""},
		{transports.Options{"alloc.cache": "64M", "alloc.purge": "immediate", "alloc.thp": "on"},
			Config{CacheBytes: 64 << 20, Purge: Immediate, THP: true, DelayFrees: 64}, ""},
		{transports.Options{"alloc.purge": "delayed", "alloc.delay": "3"}, Config{CacheBytes: 256 << 20, Purge: Delayed, DelayFrees: 3}, ""},
		{transports.Options{"alloc.cache": "0", "alloc.purge": "never"}, Config{Purge: Never, DelayFrees: 64}, ""},
		{transports.Options{"alloc.cache": "lots"}, Config{}, `alloc.cache="lots"`},
		{transports.Options{"alloc.cache": "-1"}, Config{}, `alloc.cache="-1"`},
		{transports.Options{"alloc.purge": "sometimes"}, Config{}, `alloc.purge="sometimes"`},
		{transports.Options{"alloc.thp": "yes"}, Config{}, `alloc.thp="yes"`},
		{transports.Options{"alloc.delay": "0"}, Config{}, "alloc.delay=0"},
	}
	for _, c := range cases {
		got, err := transporttest.ParseError(t, ParseConfig, c.opts, c.err)
		if c.err == "" && err == nil && got != c.want {
			t.Errorf("%v: got %+v, want %+v", c.opts, got, c.want)
		}
		if c.err == "" && err == nil {
			back, err := ParseConfig(got.Options())
			if err != nil || back != got {
				t.Errorf("%+v does not survive Options(): %+v, %v", got, back, err)
			}
		}
	}
}

func TestSplitOptions(t *testing.T) {
	cases := []struct {
		opts      transports.Options
		own, rest int
		err       string
	}{
		{nil, 0, 0, ""},
		{transports.Options{"sm.depth": "4", "alloc.purge": "never", "regcache.entries": "hooked"}, 2, 1, ""},
		{transports.Options{"alloc.cahce": "1M"}, 0, 0, `"alloc.cahce"`},
		{transports.Options{"regcache.entries": "stack"}, 0, 0, `regcache.entries="stack"`},
		{transports.Options{"alloc.purge": "soon"}, 0, 0, `alloc.purge="soon"`},
	}
	split := func(o transports.Options) ([2]transports.Options, error) {
		own, rest, err := SplitOptions(o)
		return [2]transports.Options{own, rest}, err
	}
	for _, c := range cases {
		got, err := transporttest.ParseError(t, split, c.opts, c.err)
		if own, rest := got[0], got[1]; c.err == "" && err == nil && (len(own) != c.own || len(rest) != c.rest) {
			t.Errorf("%v: own %v rest %v, want %d and %d keys", c.opts, own, rest, c.own, c.rest)
		}
	}
}

func TestClassSize(t *testing.T) {
	page := sys.PageSize
	cases := []struct{ n, want int }{
		{0, page}, {1, page}, {page, page}, {page + 1, 2 * page},
		{64 << 10, 64 << 10}, {64<<10 + 1, 128 << 10}, {3 << 20, 4 << 20}, {MaxClass, MaxClass},
	}
	for _, c := range cases {
		if got, err := ClassSize(c.n); err != nil || got != c.want {
			t.Errorf("ClassSize(%d) = %d, %v; want %d", c.n, got, err, c.want)
		}
	}
	for _, n := range []int{-1, MaxClass + 1} {
		if _, err := ClassSize(n); err == nil {
			t.Errorf("ClassSize(%d): no error", n)
		}
	}
}

func TestTHPModeAndSmapsFixtures(t *testing.T) {
	mode, err := THPMode("testdata/thp-madvise")
	if err != nil || mode != "madvise" {
		t.Errorf("THPMode: %q, %v; want madvise", mode, err)
	}
	if _, err := THPMode("testdata/none"); err == nil {
		t.Error("THPMode without the sysfs file: no error")
	}
	m, err := mappingIn("testdata/smaps", 0x7f0000201000)
	if err != nil {
		t.Fatal(err)
	}
	want := Mapping{Start: 0x7f0000200000, End: 0x7f0000600000, RSS: 4096 << 10, AnonHuge: 4096 << 10, Locked: 8 << 10}
	if m.Start != want.Start || m.End != want.End || m.RSS != want.RSS || m.AnonHuge != want.AnonHuge || m.Locked != want.Locked ||
		!m.Has("hg") || m.Has("nh") {
		t.Errorf("got %+v, want %+v with flag hg", m, want)
	}
	if _, err := mappingIn("testdata/smaps", 0x1000); err == nil || !strings.Contains(err.Error(), "no mapping contains") {
		t.Errorf("address outside every mapping: %v", err)
	}
}
