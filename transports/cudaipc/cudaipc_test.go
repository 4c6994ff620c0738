package cudaipc

import (
	"errors"
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

// The handle table: entries appear in order, lookups find the allocation
// holding a range (the newest, when an address was reused) and nothing
// outside; a full table is an error, not an overwrite.
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
	if err := tb.publish(cuda.Allocation{Base: 0x1000, Size: 0x1000, BufferID: 1}, h(1)); err != nil {
		t.Fatal(err)
	}
	if err := tb.publish(cuda.Allocation{Base: 0x4000, Size: 0x100, BufferID: 2}, h(2)); err != nil {
		t.Fatal(err)
	}
	if err := tb.publish(cuda.Allocation{Base: 0x1000, Size: 0x800, BufferID: 3}, h(3)); err != nil { // reused address
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr  uintptr
		n     int
		index int
		id    uint64
	}{
		{0x1000, 16, 2, 3},    // the newest allocation at a reused address
		{0x1900, 0x100, 0, 1}, // past the new one's end: only the old holds it
		{0x4000, 0x100, 1, 2},
		{0x4080, 0x100, -1, 0}, // runs past the end
		{0x3000, 1, -1, 0},
	} {
		e, i, ok := tb.find(tc.addr, tc.n)
		if i != tc.index || ok != (tc.index >= 0) || (ok && (e.id != tc.id || e.handle != h(byte(tc.id)))) {
			t.Errorf("find(%#x, %d) = entry %d (id %d, ok %v), want %d (id %d)", tc.addr, tc.n, i, e.id, ok, tc.index, tc.id)
		}
	}
	for i := 3; i < tableEntries; i++ {
		if err := tb.publish(cuda.Allocation{Base: uintptr(0x100000 * (i + 1)), Size: 64, BufferID: uint64(i + 1)}, h(0)); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if err := tb.publish(cuda.Allocation{Base: 0x1, Size: 1}, h(0)); err == nil || !strings.Contains(err.Error(), "table full") {
		t.Fatalf("publish into a full table: %v", err)
	}
	// The completion events' handles sit past the entries, apart from them.
	for i := range eventSlots {
		tb.events[i][0] = byte(i + 1)
	}
	if e, _, ok := tb.find(0x4000, 0x100); !ok || e.handle != h(2) {
		t.Errorf("event handles overwrote entry 1: %v", e)
	}
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
