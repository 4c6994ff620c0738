package cudaipc

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/cuda/cudatest"
)

// relayOne rings r for one message once its block runs (launching it if
// none does) and a slot is free, and waits until the message has landed.
func relayOne(t testing.TB, r *relay, dst, src uintptr, n int) {
	number := ringRunning(t, r, dst, src, n)
	within(t, fmt.Sprintf("relay message %d done", number), func() bool {
		ok, err := r.landed(number)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
}

// ringRunning rings r once its block runs and a slot is free.
func ringRunning(t testing.TB, r *relay, dst, src uintptr, n int) uint64 {
	within(t, "a running relay block with a free slot", func() bool {
		if err := r.warm(); err != nil {
			t.Fatal(err)
		}
		return r.running() && r.free()
	})
	number, err := r.ring(dst, src, n)
	if err != nil {
		t.Fatal(err)
	}
	return number
}

// within spins until cond holds, failing after 10 s (a relay that never
// answers: the block did not start or lost the bell).
func within(t testing.TB, what string, cond func() bool) {
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; !cond(); i++ {
		if i%1024 == 0 && time.Now().After(deadline) {
			t.Fatalf("no %s after 10 s", what)
		}
	}
}

// testRelay starts a relay in the bound context, stopped when the test
// ends unless the test stopped it.
func testRelay(t testing.TB) *relay {
	t.Helper()
	r, err := startRelay(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.stop() })
	return r
}

// The relay on a real device: its blocks copy message after message,
// aligned and not, each byte for byte and nothing around it, and end when
// told. (No subtests: the context is bound to this goroutine's thread.)
func TestRelayCopiesOnDevice(t *testing.T) {
	dev := cudatest.Device(t, 0)
	r := testRelay(t)
	const most, guard = 8192, 16
	src := cudatest.Alloc(t, dev, cuda.MemDevice, most+guard)
	dst := cudatest.Alloc(t, dev, cuda.MemDevice, most+4*guard)
	pattern := make([]byte, most+guard)
	got := make([]byte, most+4*guard)
	for round := range 3 { // the same sizes again: a source rewritten between messages
		for i := range pattern {
			pattern[i] = byte(i*7 + round*31 + i>>9)
		}
		if err := cuda.CopyHtoD(src.Ptr(), pattern); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 8, 15, 16, 17, 1024, 4099, most} {
			for _, shift := range []int{0, 3} { // 16-byte aligned ends, then bytes
				if err := cuda.Memset(dst.Ptr(), 0xee, len(got)); err != nil {
					t.Fatal(err)
				}
				relayOne(t, r, dst.Ptr()+guard+uintptr(shift), src.Ptr()+uintptr(shift), n)
				if err := cuda.CopyDtoH(got, dst.Ptr()); err != nil {
					t.Fatal(err)
				}
				at := guard + shift
				if want := pattern[shift : shift+n]; !bytes.Equal(got[at:at+n], want) {
					t.Fatalf("round %d, %d bytes from offset %d: wrong bytes landed", round, n, shift)
				}
				for i, b := range append(got[:at:at], got[at+n:at+n+guard]...) {
					if b != 0xee {
						t.Fatalf("round %d, %d bytes from offset %d: byte %d outside the copy changed to %#x", round, n, shift, i, b)
					}
				}
			}
		}
	}
	// A window rung ahead, each message into its own part of dst: the
	// block takes them in turn, and the ring refills as they land.
	const part = 64
	if err := cuda.Memset(dst.Ptr(), 0xee, len(got)); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for k := range most / part {
		last = ringRunning(t, r, dst.Ptr()+uintptr(k*part), src.Ptr()+uintptr(k*part), part-k%part)
	}
	relayOne(t, r, dst.Ptr(), src.Ptr(), 0) // after the window: its number covers it
	if err := cuda.CopyDtoH(got, dst.Ptr()); err != nil {
		t.Fatal(err)
	}
	for k := range most / part {
		n := part - k%part
		if !bytes.Equal(got[k*part:k*part+n], pattern[k*part:k*part+n]) || k%part > 0 && got[k*part+n] != 0xee {
			t.Fatalf("window message %d of %d (%d bytes): wrong bytes landed", k+1, last, n)
		}
	}
	if err := r.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// The block ends once idle, so calls that wait for the whole context
// return (a block that never ended held a module load and cuMemFree until
// it was told to stop), and the next message launches it again.
func TestRelayYieldsTheContext(t *testing.T) {
	dev := cudatest.Device(t, 0)
	r := testRelay(t)
	src := cudatest.Alloc(t, dev, cuda.MemDevice, 64)
	dst := cudatest.Alloc(t, dev, cuda.MemDevice, 64)
	for round := 1; round <= 3; round++ {
		relayOne(t, r, dst.Ptr(), src.Ptr(), 64)
		if r.launch < uint64(round) { // more if the block ended before this thread saw it start
			t.Fatalf("round %d: %d launches, want one a round at least (the block ends when idle)", round, r.launch)
		}
		within(t, "the idle block's end", func() bool { return atomic.LoadUint64(r.exited) == r.launch })
		mod, err := cuda.LoadModule([]byte(copyPTX)) // waits for the context
		if err != nil {
			t.Fatal(err)
		}
		if err := mod.Unload(); err != nil {
			t.Fatal(err)
		}
		b, err := dev.Alloc(cuda.MemDevice, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Free(); err != nil { // cuMemFree: waits for the context
			t.Fatal(err)
		}
	}
}

// BenchmarkRelay is a small device-to-device message through the relay,
// from the host's ring until the host sees it done: to set beside
// internal/cuda's BenchmarkSmallCopyDone (the same through a copy engine)
// and BenchmarkGPUSignal (the bus's round trip with no copy).
func BenchmarkRelay(b *testing.B) {
	for _, size := range []int{8, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			dev := cudatest.Device(b, 0)
			src := cudatest.Alloc(b, dev, cuda.MemDevice, size)
			dst := cudatest.Alloc(b, dev, cuda.MemDevice, size)
			r := testRelay(b)
			relayOne(b, r, dst.Ptr(), src.Ptr(), size) // the block is up
			b.ResetTimer()
			for range b.N {
				relayOne(b, r, dst.Ptr(), src.Ptr(), size)
			}
			b.StopTimer()
			if err := r.stop(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// A message the bell's 48-bit words cannot carry is refused, not rung.
func TestRelayRefusesWideWords(t *testing.T) {
	r := &relay{bell: new([relayDepth]relaySlot)}
	for _, tc := range []struct {
		dst, src uintptr
		n        int
	}{{1 << 48, 0, 8}, {0, 1 << 50, 8}, {0, 0, relayStop}, {0, 0, -1}} {
		if _, err := r.ring(tc.dst, tc.src, tc.n); err == nil {
			t.Errorf("ring(%#x, %#x, %d) accepted", tc.dst, tc.src, tc.n)
		}
	}
	if *r.bell != ([relayDepth]relaySlot{}) || r.last != 0 {
		t.Errorf("a refused message changed the bell: %+v, last %d", *r.bell, r.last)
	}
}

// markOnly is a completer that says every mark is reached, counting the
// questions it was asked.
type markOnly struct{ asked *int }

func (k markOnly) mark(*cuda.Stream) (uint64, error) { return 1, nil }
func (k markOnly) done(int, uint64) (bool, error)    { *k.asked++; return true, nil }
func (k markOnly) flush(*cuda.Stream) error          { return nil }

// A relay token is answered from the naming rank's relay word in its
// table, whether or not this rank runs a relay; any other token goes to
// the completer.
func TestDoneReadsTheRelayWord(t *testing.T) {
	tables := testTables(t, 2)
	asked := 0
	c := markingCopier{copier: &copier{tables: tables}, marks: markOnly{&asked}}
	*tables[1].relay = 7
	for _, tc := range []struct {
		rank  int
		token uint64
		want  bool
	}{{1, relayToken | 7, true}, {1, relayToken | 8, false}, {0, relayToken | 1, false}} {
		if got, err := c.Done(tc.rank, tc.token); err != nil || got != tc.want {
			t.Errorf("Done(rank %d, relay message %d) = %v, %v; want %v", tc.rank, tc.token&^relayToken, got, err, tc.want)
		}
	}
	if asked != 0 {
		t.Errorf("relay tokens went to the completer %d times", asked)
	}
	if got, err := c.Done(1, 3); err != nil || !got || asked != 1 {
		t.Errorf("Done(rank 1, mark 3) = %v, %v after %d questions to the completer; want its answer", got, err, asked)
	}
	for _, bad := range []struct {
		rank  int
		token uint64
	}{{2, relayToken | 1}, {-1, relayToken | 1}, {0, relayToken}} {
		if _, err := c.Done(bad.rank, bad.token); err == nil {
			t.Errorf("Done(rank %d, token %#x) accepted", bad.rank, bad.token)
		}
	}
}

// fakeBlock stands in for the relay's block and stream: it records
// launches and stream copies, and the test decides when the block starts,
// what it takes (done) and when it ends (exited).
type fakeBlock struct {
	r        *relay
	launches [][2]uint64 // first, launch number
	copies   []uint64    // n of each stream copy
	refuse   error
}

func (f *fakeBlock) run(first, launch uint64) error {
	if f.refuse != nil {
		return f.refuse
	}
	f.launches = append(f.launches, [2]uint64{first, launch})
	return nil
}

func (f *fakeBlock) copy(_, _, n uint64) error { f.copies = append(f.copies, n); return nil }
func (f *fakeBlock) start()                    { atomic.StoreUint64(f.r.started, f.r.launch) }
func (f *fakeBlock) take(n uint64)             { atomic.StoreUint64(f.r.done, n) }
func (f *fakeBlock) end()                      { atomic.StoreUint64(f.r.exited, f.r.launch) }

func fakeRelay() (*relay, *fakeBlock) {
	var page relayPage
	r := &relay{bell: &page.bell, started: &page.started, exited: &page.exited, done: &page.done}
	f := &fakeBlock{r: r}
	r.run, r.copy, r.settle = f.run, f.copy, func() error { return nil }
	return r, f
}

// The relay rings only a block that has started and not ended; one launch
// serves until the block ends; what an ended block left is copied by the
// stream and counted done, and the next launch starts past it; a refused
// launch is tried again by the next copy.
func TestRelayRingsOnlyARunningBlock(t *testing.T) {
	r, f := fakeRelay()
	step := func(what string, ok bool) {
		t.Helper()
		if !ok {
			t.Fatalf("%s: launches %v, copies %v, last %d, done %d, launch %d", what, f.launches, f.copies, r.last, *r.done, r.launch)
		}
	}
	warm := func() {
		t.Helper()
		if err := r.warm(); err != nil {
			t.Fatal(err)
		}
	}
	ring := func(n int) uint64 {
		t.Helper()
		k, err := r.ring(0x1000, 0x2000, n)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	step("none launched yet", !r.running())
	warm()
	warm() // launched, not yet started: not again
	step("one launch from message 1", fmt.Sprint(f.launches) == "[[1 1]]" && !r.running())
	f.start()
	step("started", r.running())
	ring(8)
	ring(16)
	f.take(2)
	f.end()
	step("ended", !r.running())
	if ok, err := r.landed(2); !ok || err != nil || len(f.copies) != 0 {
		t.Fatalf("landed(2) = %v, %v; copies %v: the block took both", ok, err, f.copies)
	}
	// Ended with a message it never took: the stream copies it, and the
	// next launch starts after it.
	warm()
	f.start()
	k := ring(24)
	f.end()
	if ok, err := r.landed(k); !ok || err != nil {
		t.Fatalf("landed(%d) = %v, %v after the block ended without it", k, ok, err)
	}
	step("the stream copied message 3", fmt.Sprint(f.copies) == "[24]" && *r.done == 3)
	warm()
	step("launch 3 from message 4", fmt.Sprint(f.launches) == "[[1 1] [3 2] [4 3]]")
	// A refused launch is not counted and fails nothing (the copy takes
	// the stream); the next copy tries again.
	f.start()
	f.end()
	f.refuse = fmt.Errorf("launch refused")
	if err := r.warm(); err != nil || r.launch != 3 || r.refused == nil || r.running() {
		t.Fatalf("refused launch: err %v, %d launches, kept %v; want none, 3 and the refusal", err, r.launch, r.refused)
	}
	f.refuse = nil
	warm()
	step("launch 4 after the refusal", fmt.Sprint(f.launches[len(f.launches)-1]) == "[4 4]" && r.refused == nil)
	// The stop message, left by a block that ended without it, is not
	// copied: it only counts as done.
	f.start()
	f.end()
	stop := r.put(0, 0, relayStop)
	if ok, err := r.landed(stop); !ok || err != nil || len(f.copies) != 1 {
		t.Fatalf("landed(stop %d) = %v, %v, copies %v; want done with no copy", stop, ok, err, f.copies)
	}
}
