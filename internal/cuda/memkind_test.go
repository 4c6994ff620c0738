package cuda

import (
	"encoding/json"
	"testing"
)

func TestParseMemKind(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want MemKind
	}{
		{"host", MemHost}, {"HOST", MemHost}, {" pageable ", MemHost}, {"H", MemHost},
		{"pinned", MemPinned},
		{"device", MemDevice}, {"D", MemDevice}, {"d", MemDevice},
		{"managed", MemManaged}, {"M", MemManaged},
		{"managed-device", MemManagedDevice}, {"MD", MemManagedDevice}, {"managed:device", MemManagedDevice},
		{"managed-host", MemManagedHost}, {"MH", MemManagedHost},
		{"pool", MemPool}, {"async", MemPool},
	} {
		got, err := ParseMemKind(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseMemKind(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "gpu", "HD", "managed-", "X"} {
		if k, err := ParseMemKind(bad); err == nil {
			t.Errorf("ParseMemKind(%q) = %v, want an error", bad, k)
		}
	}
}

func TestMemKindRoundTrips(t *testing.T) {
	for k := range memKindNames {
		got, err := ParseMemKind(k.String())
		if err != nil || got != k {
			t.Errorf("%v: parse(String()) = %v, %v", k, got, err)
		}
		b, err := json.Marshal(struct{ K MemKind }{k})
		if err != nil {
			t.Fatal(err)
		}
		var back struct{ K MemKind }
		if err := json.Unmarshal(b, &back); err != nil || back.K != k {
			t.Errorf("%v: JSON %s came back as %v, %v", k, b, back.K, err)
		}
	}
	if _, err := MemKind(0).MarshalText(); err == nil {
		t.Error("MemKind(0) marshalled")
	}
	if s := MemKind(42).String(); s != "MemKind(42)" {
		t.Errorf("got %q", s)
	}
}

func TestMemKindProperties(t *testing.T) {
	for _, tc := range []struct {
		k                    MemKind
		hostVisible, managed bool
	}{
		{MemHost, true, false},
		{MemPinned, true, false},
		{MemDevice, false, false},
		{MemManaged, true, true},
		{MemManagedDevice, true, true},
		{MemManagedHost, true, true},
		{MemPool, false, false},
	} {
		if tc.k.HostVisible() != tc.hostVisible || tc.k.Managed() != tc.managed {
			t.Errorf("%v: HostVisible %v Managed %v", tc.k, tc.k.HostVisible(), tc.k.Managed())
		}
	}
}

func TestAllocHostNeedsNoDriver(t *testing.T) {
	b, err := AllocHost(10000)
	if err != nil {
		t.Fatal(err)
	}
	m := b.Bytes()
	if len(m) != 10000 || b.Ptr() == 0 || b.Kind() != MemHost {
		t.Fatalf("len %d ptr %#x kind %v", len(m), b.Ptr(), b.Kind())
	}
	m[0], m[9999] = 1, 2
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if err := b.Free(); err != nil || b.Bytes() != nil {
		t.Fatalf("second Free: %v, Bytes %v", err, b.Bytes() != nil)
	}
	if _, err := AllocHost(0); err == nil {
		t.Error("AllocHost(0) succeeded")
	}
}
