package transports

import (
	"maps"
	"testing"
)

func TestFormatSizeRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, "0"},
		{8, "8"},
		{1000, "1000"},
		{1024, "1K"},
		{1536, "1536"},
		{4096, "4K"},
		{1 << 20, "1M"},
		{1<<20 + 1<<10, "1025K"},
		{3 << 30, "3G"},
	} {
		got := FormatSize(tc.n)
		if got != tc.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tc.n, got, tc.want)
		}
		if back, err := ParseSize(got); err != nil || back != tc.n {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", got, back, err, tc.n)
		}
	}
}

// With layers options without touching either set.
func TestOptionsWith(t *testing.T) {
	base := Options{"sm.eager": "4096", "sm.depth": "64"}
	over := Options{"sm.depth": "8", "cma.mode": "push"}
	got := base.With(over)
	want := Options{"sm.eager": "4096", "sm.depth": "8", "cma.mode": "push"}
	if !maps.Equal(got, want) {
		t.Errorf("With = %v, want %v", got, want)
	}
	if base["sm.depth"] != "64" || len(base) != 2 || len(over) != 2 {
		t.Errorf("With changed its inputs: %v, %v", base, over)
	}
	if got := Options(nil).With(nil); got == nil || len(got) != 0 {
		t.Errorf("nil.With(nil) = %#v, want an empty set", got)
	}
}
