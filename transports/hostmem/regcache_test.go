package hostmem

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
)

func newCache(t *testing.T, a *Allocator, s EntryStorage) *RegCache {
	t.Helper()
	c, err := NewRegCache(a, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func mustRegister(t *testing.T, c *RegCache, b []byte) *Registration {
	t.Helper()
	r, err := c.Register(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// locked is the kernel's count of locked bytes in the area holding addr.
func locked(t *testing.T, addr uintptr) int64 {
	t.Helper()
	m, err := MappingOf(addr)
	if err != nil {
		t.Fatal(err)
	}
	return m.Locked
}

func TestRegCacheHitMissMerge(t *testing.T) {
	a := newAlloc(t, Config{CacheBytes: 64 << 20, Purge: Never})
	c := newCache(t, a, HeapEntries)
	b := mustAlloc(t, a, 64<<10)
	base := sys.AddressOf(b)
	steps := []struct {
		name     string
		buf      []byte
		hit      bool
		wantAddr uintptr
		wantLen  int
	}{
		{"first page", b[:4096], false, base, 4096},
		{"inside it", b[100:200], true, base, 4096},
		{"whole buffer, overlapping", b, false, base, 64 << 10},
		{"inside the merged entry", b[8192:12000], true, base, 64 << 10},
	}
	for _, s := range steps {
		before := c.Stats().Hits
		r := mustRegister(t, c, s.buf)
		hit := c.Stats().Hits > before
		if hit != s.hit || r.Addr != s.wantAddr || r.Len != s.wantLen || !r.Pinned {
			t.Errorf("%s: %+v, hit=%v; want hit=%v [%#x,+%d) pinned", s.name, r, hit, s.hit, s.wantAddr, s.wantLen)
		}
	}
	if st := c.Stats(); st.Hits != 2 || st.Misses != 2 || st.Entries != 1 || st.Pinned != 2 {
		t.Errorf("stats %+v: want 2 hits, 2 misses, 1 entry", st)
	}
	if got := locked(t, base); got != 64<<10 {
		t.Errorf("kernel reports %d bytes locked, want %d", got, 64<<10)
	}
	if _, ok := c.Lookup(b[60000:60001]); !ok {
		t.Error("Lookup inside the registration missed")
	}
	other := mustAlloc(t, a, 4096)
	if _, ok := c.Lookup(other); ok {
		t.Error("Lookup of an unregistered buffer hit")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := locked(t, base); got != 0 {
		t.Errorf("after Close: %d bytes still locked", got)
	}
	if _, err := c.Register(b); err == nil {
		t.Error("Register after Close succeeded")
	}
}

// The allocator's release drops the registration (and the kernel's lock)
// before the purge or unmap: a purge of still-locked pages would be
// refused (EINVAL), so a successful Free proves the order.
func TestRegCacheInvalidatedOnRelease(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
	}{
		{"purge", Config{CacheBytes: 64 << 20, Purge: Immediate}},
		{"unmap", Config{CacheBytes: 0, Purge: Never}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAlloc(t, tc.cfg)
			c := newCache(t, a, HeapEntries)
			b := mustAlloc(t, a, 1<<20)
			addr := sys.AddressOf(b)
			if r := mustRegister(t, c, b); !r.Pinned || resident(t, b) != 1<<20 {
				t.Fatalf("registration %+v: want pinned and faulted in", r)
			}
			mustFree(t, a, b) // hook: unpin, queue
			if _, ok := c.Lookup(b); ok {
				t.Fatal("registration survived the release of its memory")
			}
			st := c.Stats()
			if st.Invalidations != 1 || st.Queued != 1 || st.Entries != 0 {
				t.Errorf("stats %+v: want 1 queued invalidation, no entries", st)
			}
			if tc.cfg.Purge == Never {
				if _, err := sys.ResidentAt(addr, 1<<20); err == nil {
					t.Error("buffer still mapped after a free with no cache")
				}
				return
			}
			if n := resident(t, b); n != 0 || locked(t, addr) != 0 {
				t.Errorf("after the purge: %d bytes resident, %d locked", n, locked(t, addr))
			}
			again := mustAlloc(t, a, 1<<20)
			if sys.AddressOf(again) != addr {
				t.Fatal("purged buffer not reused")
			}
			if r := mustRegister(t, c, again); !r.Pinned || c.Stats().Misses != 2 {
				t.Errorf("re-registration %+v, stats %+v: want a pinned miss", r, c.Stats())
			}
		})
	}
}

// The kernel refuses mlock (no CAP_IPC_LOCK, RLIMIT_MEMLOCK 0): the
// registration is a recorded no-op, not a failure.
func TestRegCacheNoOpWhenPinningRefused(t *testing.T) {
	a := newAlloc(t, Config{CacheBytes: 64 << 20, Purge: Never})
	c := newCache(t, a, HeapEntries)
	b := mustAlloc(t, a, 64<<10)
	var r *Registration
	err := sys.WithoutMlockPermission(func() error {
		var err error
		r, err = c.Register(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if r.Pinned || st.Unpinned != 1 || !strings.Contains(st.PinError, "mlock") || locked(t, sys.AddressOf(b)) != 0 {
		t.Errorf("registration %+v, stats %+v: want an unpinned no-op naming mlock", r, st)
	}
	if _, ok := c.Lookup(b); !ok {
		t.Error("the no-op registration is not cached")
	}
	if r := mustRegister(t, c, mustAlloc(t, a, 64<<10)); !r.Pinned {
		t.Error("pinning not restored after WithoutMlockPermission")
	}
}

// The hazard H1 scenario in one rank, under the launcher's watchdog.
const scenarioKind = "hostmem-h1"

type scenarioParams struct {
	Config  Config       `json:"config"`
	Storage EntryStorage `json:"storage"`
}

type scenarioResult struct {
	Alloc Stats    `json:"alloc"`
	Reg   RegStats `json:"reg"`
}

// scenarioRank registers, frees and re-registers one victim buffer, then
// registers three tables' worth of live buffers, so the table grows twice,
// beating after every registration.
func scenarioRank(r *launch.Rank) (any, error) {
	var p scenarioParams
	if err := r.Params(&p); err != nil {
		return nil, err
	}
	a, err := New(p.Config)
	if err != nil {
		return nil, err
	}
	c, err := NewRegCache(a, p.Storage)
	if err != nil {
		return nil, err
	}
	victim, err := a.Alloc(64 << 10)
	if err != nil {
		return nil, err
	}
	if _, err := c.Register(victim); err != nil {
		return nil, err
	}
	if err := a.Free(victim); err != nil { // a purge (if any) falls due later
		return nil, err
	}
	var live [][]byte
	for range 3 * InitialEntries {
		b, err := a.Alloc(8192)
		if err != nil {
			return nil, err
		}
		if _, err := c.Register(b); err != nil {
			return nil, err
		}
		live = append(live, b)
		r.Beat()
	}
	for _, b := range live {
		if err := a.Free(b); err != nil {
			return nil, err
		}
	}
	res := scenarioResult{Alloc: a.Stats(), Reg: c.Stats()}
	return res, errors.Join(c.Close(), a.Close())
}

// The unsafe table deadlocks exactly where a release fires inside its
// locked growth: an immediate purge of the old table, or a delayed purge
// that falls due on that free. Without a purge there, the same code runs
// through, which is how the bug hid behind allocator settings. The safe
// table never deadlocks.
func TestHookedTableDeadlocksOnlyWhereAPurgeFires(t *testing.T) {
	cache := int64(64 << 20)
	cases := []struct {
		name    string
		storage EntryStorage
		cfg     Config
		hang    bool
	}{
		{"hooked/immediate", HookedEntries, Config{CacheBytes: cache, Purge: Immediate}, true},
		{"hooked/delayed-1", HookedEntries, Config{CacheBytes: cache, Purge: Delayed, DelayFrees: 1}, true},
		{"hooked/delayed-64", HookedEntries, Config{CacheBytes: cache, Purge: Delayed, DelayFrees: 64}, false},
		{"hooked/never", HookedEntries, Config{CacheBytes: cache, Purge: Never}, false},
		{"heap/immediate", HeapEntries, Config{CacheBytes: cache, Purge: Immediate}, false},
		{"heap/delayed-1", HeapEntries, Config{CacheBytes: cache, Purge: Delayed, DelayFrees: 1}, false},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			params, _ := json.Marshal(scenarioParams{Config: tc.cfg, Storage: tc.storage})
			// A hang is caught after 1 s; a run that must go through gets
			// 10 s, as pinning fresh pages in this VM can stall for seconds.
			deadline := 10 * time.Second
			if tc.hang {
				deadline = time.Second
			}
			out, err := launch.Run(ctx, launch.Job{Kind: scenarioKind, Size: 1, Params: params, Stall: deadline}, launch.Hooks{Stderr: io.Discard})
			var stall *launch.StallError
			if !tc.hang {
				if err != nil {
					t.Fatal(err)
				}
				var res scenarioResult
				if err := json.Unmarshal(out[0], &res); err != nil {
					t.Fatal(err)
				}
				if res.Reg.Grows != 2 || res.Reg.Misses != 1+3*InitialEntries {
					t.Errorf("registration stats %+v: want 2 growths and every registration a miss", res.Reg)
				}
				return
			}
			if !errors.As(err, &stall) {
				t.Fatalf("got %v, want the watchdog to report a stall", err)
			}
			s := stall.Stacks[0]
			for _, frame := range []string{"(*RegCache).invalidateNow", "(*Allocator).Free", "(*RegCache).growLocked", "(*RegCache).Register"} {
				if !strings.Contains(s, frame) {
					t.Errorf("stacks lack %s:\n%s", frame, s)
				}
			}
		})
	}
}
