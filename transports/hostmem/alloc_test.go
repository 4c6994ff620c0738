package hostmem

import (
	"errors"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports/transporttest"
)

func TestMain(m *testing.M) {
	transporttest.Main(m, map[string]launch.Func{scenarioKind: scenarioRank})
}

func newAlloc(t *testing.T, c Config) *Allocator {
	t.Helper()
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Release(t, a.Close)
	return a
}

func mustAlloc(t *testing.T, a *Allocator, n int) []byte {
	t.Helper()
	b, err := a.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustFree(t *testing.T, a *Allocator, b []byte) {
	t.Helper()
	if err := a.Free(b); err != nil {
		t.Fatal(err)
	}
}

// fill writes v to every byte of b's class (its capacity).
func fill(b []byte, v byte) {
	b = b[:cap(b)]
	for i := range b {
		b[i] = v
	}
}

// resident is the kernel's count (mincore) of b's resident bytes, over its
// whole class.
func resident(t *testing.T, b []byte) int {
	t.Helper()
	n, err := sys.Resident(b[:cap(b)])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAllocSizeClassesAndReuse(t *testing.T) {
	cases := []struct {
		n, same, other int // a request, one of the same class, one of another
	}{
		{0, sys.PageSize, 2 * sys.PageSize},
		{1, 100, 5000},
		{5000, 8192, 4096},
		{64<<10 + 1, 128 << 10, 64 << 10},
		{1 << 20, 600 << 10, 2 << 20},
	}
	for _, c := range cases {
		a := newAlloc(t, Config{CacheBytes: 64 << 20, Purge: Never})
		b := mustAlloc(t, a, c.n)
		class, _ := ClassSize(c.n)
		addr := sys.AddressOf(b)
		if len(b) != c.n || cap(b) != class || addr%uintptr(sys.PageSize) != 0 {
			t.Errorf("Alloc(%d): len %d cap %d at %#x; want len %d cap %d page-aligned", c.n, len(b), cap(b), addr, c.n, class)
		}
		mustFree(t, a, b)
		same := mustAlloc(t, a, c.same)
		if sys.AddressOf(same) != addr {
			t.Errorf("Alloc(%d) after freeing Alloc(%d): %#x, want the cached %#x", c.same, c.n, sys.AddressOf(same), addr)
		}
		other := mustAlloc(t, a, c.other)
		if sys.AddressOf(other) == addr {
			t.Errorf("Alloc(%d) reused a buffer of another class", c.other)
		}
		if st := a.Stats(); st.Allocs != 3 || st.CacheHits != 1 || st.Maps != 2 {
			t.Errorf("n=%d: stats %+v, want 3 allocs, 1 hit, 2 maps", c.n, st)
		}
		mustFree(t, a, same)
		mustFree(t, a, other)
	}
}

func TestFreeErrors(t *testing.T) {
	a := newAlloc(t, DefaultConfig())
	b := mustAlloc(t, a, 100)
	mustFree(t, a, b)
	foreign, err := sys.MapAnon(4096, false)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Unmap(foreign)
	for name, buf := range map[string][]byte{"double free": b, "foreign buffer": foreign, "empty": nil} {
		if err := a.Free(buf); err == nil || !strings.Contains(err.Error(), "host allocator: free") {
			t.Errorf("%s: got %v, want an error naming the free", name, err)
		}
	}
}

type release struct {
	addr   uintptr
	n      int
	mapped bool // the range was still mapped when the hook ran
}

func recordReleases(a *Allocator) *[]release {
	var got []release
	a.OnRelease(func(addr uintptr, n int) {
		_, err := sys.ResidentAt(addr, n)
		got = append(got, release{addr, n, err == nil})
	})
	return &got
}

// A cache of two 1 MiB buffers: the third free evicts the least recently
// freed buffer, unmapping it after the hook has seen the range (still
// mapped at that point); Close unmaps the rest.
func TestCacheLimitEvictsOldestAfterTheHook(t *testing.T) {
	a := newAlloc(t, Config{CacheBytes: 2 << 20, Purge: Never})
	got := recordReleases(a)
	var bufs [][]byte
	for range 3 {
		b := mustAlloc(t, a, 1<<20)
		fill(b, 1)
		bufs = append(bufs, b)
	}
	for _, b := range bufs {
		mustFree(t, a, b)
	}
	first := sys.AddressOf(bufs[0])
	if len(*got) != 1 || (*got)[0] != (release{first, 1 << 20, true}) {
		t.Fatalf("releases %+v, want one of [%#x, +1M) while still mapped", *got, first)
	}
	if _, err := sys.ResidentAt(first, 1<<20); err == nil {
		t.Error("the evicted buffer is still mapped")
	}
	for _, b := range bufs[1:] {
		if n := resident(t, b); n != 1<<20 {
			t.Errorf("cached buffer: %d bytes resident, want all of it (purge=never)", n)
		}
	}
	if n, err := a.Resident(); err != nil || n != 2<<20 {
		t.Errorf("allocator's resident bytes: %d (%v), want the two cached buffers' 2 MiB", n, err)
	}
	st := a.Stats()
	if st.Unmaps != 1 || st.UnmappedBytes != 1<<20 || st.CachedBytes != 2<<20 || st.ResidentBytes != 2<<20 || st.MappedBytes != 2<<20 {
		t.Errorf("stats %+v", st)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); len(*got) != 3 || st.Unmaps != 3 || st.MappedBytes != 0 || st.CachedBytes != 0 {
		t.Errorf("after Close: %d releases, stats %+v; want 3 unmaps, nothing mapped", len(*got), st)
	}
	if _, err := a.Alloc(1); err == nil {
		t.Error("Alloc after Close succeeded")
	}
}

// Buffers of a size no longer in use do not crowd the current size out of
// a full cache: they are older, so they go first. And what cannot fit at
// all (larger than the cache) is unmapped at once.
func TestCacheEvictsOtherClassesForTheCurrentOne(t *testing.T) {
	a := newAlloc(t, Config{CacheBytes: 2 << 20, Purge: Never})
	small := []([]byte){mustAlloc(t, a, 1<<20), mustAlloc(t, a, 1<<20)}
	for _, b := range small {
		mustFree(t, a, b)
	}
	big := mustAlloc(t, a, 2<<20)
	mustFree(t, a, big) // evicts both 1 MiB buffers
	if again := mustAlloc(t, a, 2<<20); sys.AddressOf(again) != sys.AddressOf(big) {
		t.Error("the 2 MiB buffer was not cached")
	} else {
		mustFree(t, a, again)
	}
	huge := mustAlloc(t, a, 4<<20)
	mustFree(t, a, huge)
	if st := a.Stats(); st.Unmaps != 3 || st.CachedBytes != 2<<20 || st.CacheHits != 1 {
		t.Errorf("stats %+v: want 3 unmaps (two evictions, the 4 MiB buffer), the 2 MiB buffer cached", st)
	}
}

// Purge policies, as the kernel sees them (mincore): a touched 1 MiB
// buffer is freed, then further frees happen one by one.
func TestPurgePolicies(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		cfg  Config
		want [4]int // victim's resident bytes after 0..3 further frees
	}{
		{Config{CacheBytes: 64 << 20, Purge: Immediate}, [4]int{0, 0, 0, 0}},
		{Config{CacheBytes: 64 << 20, Purge: Delayed, DelayFrees: 3}, [4]int{mib, mib, mib, 0}},
		{Config{CacheBytes: 64 << 20, Purge: Never}, [4]int{mib, mib, mib, mib}},
	}
	for _, c := range cases {
		t.Run(c.cfg.Purge.String(), func(t *testing.T) {
			a := newAlloc(t, c.cfg)
			got := recordReleases(a)
			victim := mustAlloc(t, a, mib)
			fill(victim, 0xAB)
			if n := resident(t, victim); n != mib {
				t.Fatalf("touched buffer: %d bytes resident, want %d", n, mib)
			}
			mustFree(t, a, victim)
			for k := range 4 {
				if k > 0 { // a further free, of a buffer of another class
					b := mustAlloc(t, a, 4096)
					b[0] = 1
					mustFree(t, a, b)
				}
				if n := resident(t, victim); n != c.want[k] {
					t.Errorf("after %d further frees: %d bytes resident, want %d", k, n, c.want[k])
				}
			}
			purgedVictim := c.want[3] == 0
			hooked := false
			for _, r := range *got {
				hooked = hooked || (r.addr == sys.AddressOf(victim) && r.n == mib && r.mapped)
			}
			if hooked != purgedVictim {
				t.Errorf("release hook saw the victim: %v, want %v (%+v)", hooked, purgedVictim, *got)
			}
			again := mustAlloc(t, a, mib)
			if sys.AddressOf(again) != sys.AddressOf(victim) {
				t.Fatal("the cached buffer was not reused")
			}
			want := byte(0xAB)
			if purgedVictim {
				want = 0 // the kernel zero-fills a purged private page
			}
			if again[0] != want || again[mib-1] != want {
				t.Errorf("reused buffer holds %#x...%#x, want %#x", again[0], again[mib-1], want)
			}
			mustFree(t, a, again)
		})
	}
}

// A delayed purge is for idle buffers: one reused before it fell due is
// not purged.
func TestDelayedPurgeSkipsReusedBuffer(t *testing.T) {
	a := newAlloc(t, Config{CacheBytes: 64 << 20, Purge: Delayed, DelayFrees: 2})
	v := mustAlloc(t, a, 64<<10)
	fill(v, 7)
	mustFree(t, a, v)
	v = mustAlloc(t, a, 64<<10) // reused while its purge is pending
	for range 3 {
		b := mustAlloc(t, a, 4096)
		mustFree(t, a, b)
	}
	if n := resident(t, v); n != 64<<10 || v[0] != 7 {
		t.Errorf("a buffer in use was purged: %d bytes resident, first byte %d", n, v[0])
	}
	mustFree(t, a, v)
	for range 2 {
		b := mustAlloc(t, a, 4096)
		mustFree(t, a, b)
	}
	if n := resident(t, v); n != 0 {
		t.Errorf("idle for 2 frees: %d bytes resident, want 0", n)
	}
}

func TestTransparentHugePages(t *testing.T) {
	mode, err := THPMode("/")
	if err == nil && mode == "never" {
		err = errors.New("transparent_hugepage/enabled is never")
	}
	testutil.SkipUnless(t, "thp", err)
	const size = 4 << 20
	for _, thp := range []bool{true, false} {
		a := newAlloc(t, Config{CacheBytes: 64 << 20, Purge: Immediate, THP: thp})
		b := mustAlloc(t, a, size)
		fill(b, 3)
		m, err := MappingOf(sys.AddressOf(b))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case thp && (!m.Has("hg") || m.AnonHuge < sys.HugePage):
			t.Errorf("THP on: area %+v: want flag hg and huge pages", m)
		case !thp && (!m.Has("nh") || m.AnonHuge != 0):
			t.Errorf("THP off: area %+v: want flag nh and no huge pages", m)
		}
		mustFree(t, a, b)
		if n := resident(t, b); n != 0 {
			t.Errorf("THP %v: %d bytes resident after an immediate purge", thp, n)
		}
		if st := a.Stats(); st.THPFallbacks != 0 {
			t.Errorf("THP %v: %d fallbacks", thp, st.THPFallbacks)
		}
	}
}
