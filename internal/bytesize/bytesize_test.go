package bytesize

import "testing"

func TestFormatRoundTrips(t *testing.T) {
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
		got := Format(tc.n)
		if got != tc.want {
			t.Errorf("Format(%d) = %q, want %q", tc.n, got, tc.want)
		}
		if back, err := Parse(got); err != nil || back != tc.n {
			t.Errorf("Parse(%q) = %d, %v; want %d", got, back, err, tc.n)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, s := range []string{"", "K", "-1", "4Q", "1.5M", "99999999999G"} {
		if n, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %d, want an error", s, n)
		}
	}
}

func TestHuman(t *testing.T) {
	if Human(512) != "512 B" || Human(3<<30) != "3 GiB" {
		t.Fatalf("Human: %q %q", Human(512), Human(3<<30))
	}
}
