package cudaipc

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/gpumem"
)

func TestParseParams(t *testing.T) {
	for _, tc := range []struct {
		opts transports.Options
		want Params
		err  string
	}{
		{opts: nil, want: Params{Staging: "async", Threshold: DefaultThreshold, PinnedThreshold: DefaultPinnedThreshold, Copy: CopyEngine, Completion: CompleteEvent, Cache: DefaultCache, Alloc: DefaultAlloc}},
		{opts: transports.Options{"cudaipc.staging": "sync", "cudaipc.threshold": "1M", "cudaipc.pinned-threshold": "4M", "cudaipc.gpus": "1, 0", "cudaipc.cache": "0", "cudaipc.copy": "sm", "cudaipc.completion": "sync"},
			want: Params{Staging: "sync", Threshold: 1 << 20, PinnedThreshold: 4 << 20, Copy: CopySM, Completion: CompleteSync, GPUs: []int{1, 0}, Alloc: DefaultAlloc}},
		{opts: transports.Options{"gpu.alloc": "worker"}, want: Params{Staging: "async", Threshold: DefaultThreshold, PinnedThreshold: DefaultPinnedThreshold, Copy: CopyEngine, Completion: CompleteEvent, Cache: DefaultCache, Alloc: gpumem.Worker}},
		{opts: transports.Options{"cudaipc.completion": "flag"}, want: Params{Staging: "async", Threshold: DefaultThreshold, PinnedThreshold: DefaultPinnedThreshold, Copy: CopyEngine, Completion: CompleteFlag, Cache: DefaultCache, Alloc: DefaultAlloc}},
		{opts: transports.Options{"cudaipc.completion": "poll"}, err: "cudaipc.completion"},
		{opts: transports.Options{"cudaipc.copy": "dma"}, err: "cudaipc.copy"},
		{opts: transports.Options{"cudaipc.cache": "-1"}, err: "cudaipc.cache"},
		{opts: transports.Options{"gpu.alloc": "cudaFree"}, err: "gpu.alloc"},
		{opts: transports.Options{"cudaipc.pinned-threshold": "-"}, err: "cudaipc.pinned-threshold"},
		{opts: transports.Options{"cudaipc.staging": "legacy"}, err: "cudaipc.staging"},
		{opts: transports.Options{"cudaipc.gpus": "0,x"}, err: `cudaipc.gpus="0,x": not a GPU ordinal: "x"`},
		{opts: transports.Options{"cudaipc.gpus": "-1"}, err: "not a GPU ordinal"},
		{opts: transports.Options{"cudaipc.threshold": "big"}, err: "cudaipc.threshold"},
	} {
		got, err := ParseParams(tc.opts)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want one naming %q", tc.opts, err, tc.err)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.opts, err)
		case !reflect.DeepEqual(got, tc.want):
			t.Errorf("%v: got %+v, want %+v", tc.opts, got, tc.want)
		}
	}
}

// The handle table: lookups find the allocation holding a range (the
// newest, when an address was reused) and nothing outside; once the ring
// wraps, the oldest entries are gone and never read as the newer ones in
// their slots; an entry being rewritten is never read; the completion
// events' handles sit apart, at the table's end.
func TestHandleTable(t *testing.T) {
	mem, err := sys.MapAnon(tableBytes, true)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Unmap(mem)
	tb, err := tableAt(mem)
	if err != nil {
		t.Fatal(err)
	}
	h := func(b byte) (x cuda.IPCMemHandle) { x[0], x[63] = b, b; return x }
	for i, a := range []cuda.Allocation{
		{Base: 0x1000, Size: 0x1000, BufferID: 1},
		{Base: 0x4000, Size: 0x100, BufferID: 2},
		{Base: 0x1000, Size: 0x800, BufferID: 3}, // reused address
	} {
		if k := tb.publish(a, h(byte(a.BufferID))); k != uint64(i) {
			t.Fatalf("entry %d numbered %d", i, k)
		}
	}
	lookups := []struct {
		addr uintptr
		n    int
		id   uint64 // 0: not found
	}{
		{0x1000, 16, 3},    // the newest allocation at a reused address
		{0x1900, 0x100, 1}, // past the new one's end: only the old holds it
		{0x4000, 0x100, 2},
		{0x4080, 0x100, 0}, // runs past the end
		{0x3000, 1, 0},
	}
	check := func(when string, gone map[uint64]bool) {
		t.Helper()
		for _, tc := range lookups {
			want := tc.id
			if gone[want] {
				want = 0
			}
			e, ok := tb.find(tc.addr, tc.n)
			if ok != (want != 0) || (ok && (e.id != want || e.k != want-1 || e.handle != h(byte(want)))) {
				t.Errorf("%s: find(%#x, %d) = id %d (entry %d, ok %v), want id %d", when, tc.addr, tc.n, e.id, e.k, ok, want)
			}
		}
	}
	check("three entries", nil)

	// Wrap the ring: entries 0 and 1 are overwritten, 2 survives as the
	// oldest; slot 0 now holds entry 256, which must not read as entry 0.
	for i := 3; i < tableEntries+2; i++ {
		tb.publish(cuda.Allocation{Base: uintptr(0x100000 * (i + 1)), Size: 64, BufferID: uint64(1000 + i)}, h(0))
	}
	check("after wrapping", map[uint64]bool{1: true, 2: true})
	if _, ok := tb.read(0); ok {
		t.Error("entry 0 read after entry 256 took its slot")
	}
	if e, ok := tb.read(tableEntries); !ok || e.id != 1000+tableEntries {
		t.Errorf("entry %d: %+v, %v", tableEntries, e, ok)
	}

	// An entry the owner is rewriting (its number invalid) is skipped.
	w := &tb.entries[2]
	w[0] = invalid
	if _, ok := tb.find(0x1000, 16); ok {
		t.Error("an entry being rewritten was found")
	}
	w[0] = 2
	check("after the rewrite", map[uint64]bool{1: true, 2: true})

	for i := range eventSlots {
		tb.events[i][0] = byte(i + 1)
	}
	check("after writing the event handles", map[uint64]bool{1: true, 2: true})
	if got := mem[tableBytes-cuda.IPCHandleSize]; got != eventSlots {
		t.Errorf("last event handle not at the table's end: byte %d", got)
	}
	if _, err := tableAt(mem[:tableBytes-1]); err == nil {
		t.Fatal("a short table region was accepted")
	}
}

func TestNewWithoutCUDA(t *testing.T) {
	if _, err := cuda.DeviceCount(); err == nil {
		t.Skip("CUDA is available here")
	}
	env := transports.Env{Rank: 0, Size: 2, PIDs: []int{1, 2}}
	_, err := New(env)
	if !errors.Is(err, transports.ErrNotSupported) || !strings.Contains(err.Error(), "cudaipc") {
		t.Fatalf("New without CUDA: %v, want ErrNotSupported naming cudaipc", err)
	}
	if err := Check(nil, env); !errors.Is(err, transports.ErrNotSupported) {
		t.Fatalf("Check without CUDA: %v", err)
	}
}

func TestProgressThreadRefused(t *testing.T) {
	_, err := New(transports.Env{Rank: 0, Size: 2, PIDs: []int{1, 2}, Options: transports.Options{"sm.progress": "thread"}})
	if err == nil || !strings.Contains(err.Error(), "sm.progress=thread") {
		t.Fatalf("progress thread: %v", err)
	}
}

// The copy kernel's grid: a thread per 16-byte vector, never more blocks
// than the device holds at once, and one block for a message with no
// whole vector (its tail).
func TestSMCopyGrid(t *testing.T) {
	k := &smCopy{maxBlocks: 528} // 132 SMs × 4 blocks of 512 threads
	for _, c := range []struct{ n, want int }{
		{0, 1}, {1, 1}, {15, 1}, {16, 1}, {copyBlock * vectorBytes, 1}, {copyBlock*vectorBytes + 16, 2},
		{1 << 20, 128}, {256 << 20, 528},
	} {
		if got := k.grid(c.n); got != c.want {
			t.Errorf("grid(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	for _, c := range []struct {
		dst, src uintptr
		ok       bool
	}{{0x1000, 0x2000, true}, {0x1010, 0x20f0, true}, {0x1008, 0x2000, false}, {0x1000, 0x2001, false}} {
		if aligned(c.dst, c.src) != c.ok {
			t.Errorf("aligned(%#x, %#x) = %v", c.dst, c.src, !c.ok)
		}
	}
}

// The embedded kernel names its entry and the parameters launch sets.
func TestCopyPTXEntry(t *testing.T) {
	for _, want := range []string{".visible .entry " + copyEntry + "(", "_param_dst", "_param_src", "_param_n", "ld.global.v4.u32", "st.global.u8"} {
		if !strings.Contains(copyPTX, want) {
			t.Errorf("copy.ptx lacks %q", want)
		}
	}
}

// A completion flag has reached a token when it reads the token or a later
// number, across the wrap of 32 bits; mark hands out numbers in turn,
// skipping 0, and flush queues nothing when nothing is pending; done
// refuses a token no copy could have, and reads the named rank's flag.
func TestCompletionFlagsCompareCyclically(t *testing.T) {
	for _, c := range []struct {
		v, token uint32
		want     bool
	}{
		{0, 1, false}, {1, 1, true}, {2, 1, true}, {1, 2, false},
		{math.MaxUint32, math.MaxUint32, true}, {1, math.MaxUint32, true}, {math.MaxUint32, 1, false},
		{1 << 31, 1, true}, {1<<31 + 1, 1, false},
	} {
		if got := reached(c.v, c.token); got != c.want {
			t.Errorf("flag %d, token %d: reached %v, want %v", c.v, c.token, got, c.want)
		}
	}
	tables := testTables(t, 2)
	k := &flagCompletions{tables: tables}
	for want := uint64(1); want <= 3; want++ { // numbers wait for flush
		if got, err := k.mark(nil); got != want || err != nil {
			t.Fatalf("mark: %d, %v; want %d", got, err, want)
		}
	}
	k.seq, k.stored = math.MaxUint32, math.MaxUint32
	if err := k.flush(nil); err != nil { // nothing pending: no store queued
		t.Fatal(err)
	}
	if got, _ := k.mark(nil); got != 1 {
		t.Errorf("mark after %d: %d, want 1 (0 skipped)", uint32(math.MaxUint32), got)
	}
	*tables[1].flag = 5
	for _, c := range []struct {
		rank  int
		token uint64
		want  bool
		err   bool
	}{{1, 5, true, false}, {1, 6, false, false}, {0, 5, false, false}, {1, 0, false, true}, {1, 1 << 32, false, true}, {2, 1, false, true}} {
		got, err := k.done(c.rank, c.token)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("rank %d token %d: %v, %v; want %v, error %v", c.rank, c.token, got, err, c.want, c.err)
		}
	}
}

// testTables are n handle tables over fresh memory, one per rank.
func testTables(t *testing.T, n int) []*table {
	t.Helper()
	var tables []*table
	for range n {
		tb, err := tableAt(make([]byte, tableBytes))
		if err != nil {
			t.Fatal(err)
		}
		tables = append(tables, tb)
	}
	return tables
}
