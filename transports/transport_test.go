package transports

import "testing"

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
