package bench_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	_ "github.com/gotune/gotune/transports/all"
	"github.com/gotune/gotune/transports/cma"
	"github.com/gotune/gotune/transports/sm"
)

// corrupting wraps a transport and flips one byte of the n-th received
// message (counting every completed receive), the way a broken copy would.
type corrupting struct {
	transports.Transport
	n, seen int
	offset  int
	pending map[transports.Request][]byte
}

func (c *corrupting) receive(buf []byte) {
	c.seen++
	if c.seen == c.n && len(buf) > c.offset {
		buf[c.offset] ^= 0x40
	}
}

func (c *corrupting) Recv(peer int, buf []byte) (int, error) {
	n, err := c.Transport.Recv(peer, buf)
	c.receive(buf[:n])
	return n, err
}

func (c *corrupting) Irecv(peer int, buf []byte) (transports.Request, error) {
	q, err := c.Transport.Irecv(peer, buf)
	if err == nil {
		c.pending[q] = buf
	}
	return q, err
}

func (c *corrupting) Wait(reqs ...transports.Request) error {
	err := c.Transport.Wait(reqs...)
	for _, q := range reqs {
		if buf, ok := c.pending[q]; ok {
			delete(c.pending, q)
			c.receive(buf)
		}
	}
	return err
}

// registerFaulty registers name: sm, except that rank 1's transport is
// wrapped with a planted fault, so the fault runs in real rank processes.
func registerFaulty(name string, wrap func(transports.Transport) transports.Transport) {
	base, _ := transports.Lookup("sm")
	transports.Register(&transports.Driver{
		Name: name, Options: base.Options, SharedBytes: base.SharedBytes, Check: base.Check,
		New: func(env transports.Env) (transports.Transport, error) {
			t, err := base.New(env)
			if err != nil || env.Rank != 1 {
				return t, err
			}
			return wrap(t), nil
		},
	})
}

func init() {
	// rank 1 corrupts byte 3 of its 5th received message
	registerFaulty("sm-corrupt", func(t transports.Transport) transports.Transport {
		return &corrupting{Transport: t, n: 5, offset: 3, pending: map[transports.Request][]byte{}}
	})
	// rank 1's 50th receive never returns
	registerFaulty("sm-hang", func(t transports.Transport) transports.Transport { return &hanging{Transport: t} })
	// rank 1 says it gave single copy up with rank 0
	registerFaulty("sm-gaveup", func(t transports.Transport) transports.Transport { return givingUp{t} })
}

// givingUp is a transport that reports single copy given up with rank 0,
// as cma does when the kernel refuses its copies (Yama, another user).
type givingUp struct{ transports.Transport }

func (givingUp) Fallbacks() map[int]error {
	return map[int]error{0: errors.New("planted refusal")}
}

// A run whose single copy was given up says so at every point: its
// figures are copy-in/copy-out's.
func TestGivenUpSingleCopyIsWarned(t *testing.T) {
	res := mustRun(t, bench.Spec{Transport: "sm-gaveup", Pattern: bench.Bandwidth, Sizes: []int{4096, 65536}, Reps: 1, Iters: 2, Warmup: 1})
	want := "rank 1 gave single copy up with rank 0: planted refusal"
	for _, p := range res.Points {
		if !slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, want) }) {
			t.Errorf("size %d: warnings %q lack %q", p.Size, p.Warnings, want)
		}
	}
	if clean := mustRun(t, bench.Spec{Transport: "sm", Pattern: bench.Bandwidth, Sizes: []int{4096}, Reps: 1, Iters: 2, Warmup: 1}); slices.ContainsFunc(clean.Points[0].Warnings, func(w string) bool { return strings.Contains(w, "single copy") }) {
		t.Errorf("sm warns of single copy given up: %q", clean.Points[0].Warnings)
	}
}

// hanging wraps a transport whose 50th receive on rank 1 never returns: a
// deadlock, as far as anyone outside can tell.
type hanging struct {
	transports.Transport
	n int
}

//go:noinline
func (h *hanging) Recv(peer int, buf []byte) (int, error) {
	if h.n++; h.n == 50 {
		select {} // a goroutine blocked forever, as in a lost wake-up
	}
	return h.Transport.Recv(peer, buf)
}

func TestMain(m *testing.M) {
	launch.MaybeRunRank()
	os.Exit(m.Run())
}

// inProcess runs Measure on two endpoints of this process.
func inProcess(t *testing.T, spec bench.Spec, wrap func(rank int, t transports.Transport) transports.Transport) ([]bench.Point, error) {
	t.Helper()
	p := sm.DefaultParams()
	seg, err := bench.Alloc(p.SegmentBytes(2))
	if err != nil {
		t.Fatal(err)
	}
	defer bench.Free(seg)
	var (
		wg     sync.WaitGroup
		errs   [2]error
		points []bench.Point
		eps    [2]*sm.Endpoint
	)
	for r := range 2 {
		env := transports.Env{Rank: r, Size: 2, PIDs: []int{os.Getpid(), os.Getpid()}, Segment: seg}
		ep, err := sm.New(env, p, nil, "sm")
		if err != nil {
			t.Fatal(err)
		}
		eps[r] = ep
		var tr transports.Transport = ep
		if wrap != nil {
			tr = wrap(r, ep)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pts, err := bench.Measure(tr, r, spec, nil)
			errs[r] = err
			if err != nil { // the peer would wait forever: stop it
				eps[1-r].Abort(fmt.Errorf("peer rank %d failed", r))
			}
			if r == 0 {
				points = pts
			}
		}()
	}
	wg.Wait()
	return points, errors.Join(errs[:]...)
}

func checkPoints(t *testing.T, spec bench.Spec, points []bench.Point) {
	t.Helper()
	if len(points) != len(spec.Sizes) {
		t.Fatalf("%d points for %d sizes", len(points), len(spec.Sizes))
	}
	for i, p := range points {
		if p.Size != spec.Sizes[i] || len(p.Samples) != spec.Reps || p.Unit != spec.Pattern.Unit() {
			t.Errorf("point %d: size %d, %d samples, unit %q", i, p.Size, len(p.Samples), p.Unit)
		}
		for _, v := range append(p.Samples, p.Median, p.P50, p.P90, p.P99) {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("size %d: non-positive or infinite value %v", p.Size, v)
			}
		}
		tailGrows := p.P50 <= p.P90 && p.P90 <= p.P99
		if !spec.Pattern.HigherIsBetter() != tailGrows && p.P50 != p.P99 {
			t.Errorf("size %d: percentiles %v/%v/%v point the wrong way", p.Size, p.P50, p.P90, p.P99)
		}
		if p.CILow > p.Median || p.Median > p.CIHigh {
			t.Errorf("size %d: inconsistent statistics %+v", p.Size, p)
		}
		if p.Validated != spec.Validate {
			t.Errorf("size %d: validated=%v, want %v", p.Size, p.Validated, spec.Validate)
		}
	}
}

func TestPatternsInProcessValidated(t *testing.T) {
	for _, pat := range bench.Patterns {
		t.Run(string(pat), func(t *testing.T) {
			spec := bench.Spec{Transport: "sm", Pattern: pat, Sizes: []int{1, 4096, 100000}, Reps: 3, Iters: 20, Warmup: 2, Window: 8, Validate: true}
			pts, err := inProcess(t, spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkPoints(t, spec, pts)
		})
	}
}

func TestValidationCatchesPlantedCorruption(t *testing.T) {
	for _, pat := range bench.Patterns {
		t.Run(string(pat), func(t *testing.T) {
			spec := bench.Spec{Transport: "sm", Pattern: pat, Sizes: []int{64}, Reps: 2, Iters: 10, Warmup: 1, Window: 4, Validate: true}
			_, err := inProcess(t, spec, func(rank int, tr transports.Transport) transports.Transport {
				if rank != 1 {
					return tr
				}
				return &corrupting{Transport: tr, n: 7, offset: 3, pending: map[transports.Request][]byte{}}
			})
			var ve *bench.ValidationError
			if !errors.As(err, &ve) || ve.Offset != 3 || ve.Size != 64 {
				t.Fatalf("got %v, want a validation error at byte 3 of a 64-byte message", err)
			}
		})
	}
}

func TestCorruptionWithoutValidationGoesUnnoticed(t *testing.T) {
	// The control for the test above: the same corruption, validation off.
	spec := bench.Spec{Transport: "sm", Pattern: bench.Latency, Sizes: []int{64}, Reps: 2, Iters: 10, Warmup: 1, Window: 1}
	_, err := inProcess(t, spec, func(rank int, tr transports.Transport) transports.Transport {
		return &corrupting{Transport: tr, n: 7, offset: 3, pending: map[transports.Request][]byte{}}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Real rank processes: every transport, every pattern, validated; cma
// also in split mode (both ranks copy each 1 MiB message after the first).
func TestRunAcrossProcesses(t *testing.T) {
	for _, c := range []struct {
		name, tr string
		opts     transports.Options
	}{{"sm", "sm", nil}, {"cma", "cma", nil}, {"cma-split", "cma", transports.Options{cma.KeyMode: "split"}}} {
		tr := c.tr
		for _, pat := range bench.Patterns {
			t.Run(c.name+"/"+string(pat), func(t *testing.T) {
				spec := bench.Spec{Transport: tr, Options: c.opts, Pattern: pat, Sizes: []int{8, 8192, 1 << 20}, Reps: 2, Iters: 5, Warmup: 1, Window: 4, Validate: true}
				res := mustRun(t, spec)
				checkPoints(t, spec, res.Points)
				for _, p := range res.Points { // 2 reps: both ranks warn about the interval; one warning each
					if len(p.Warnings) == 0 || len(slices.Compact(slices.Sorted(slices.Values(p.Warnings)))) != len(p.Warnings) {
						t.Errorf("size %d: warnings %q: want the interval warning, once", p.Size, p.Warnings)
					}
				}
				if res.Provenance.Kernel == "" || res.Provenance.Gotune == "" || res.Spec.Transport != tr {
					t.Errorf("provenance or spec missing: %+v %+v", res.Provenance, res.Spec)
				}
			})
		}
	}
}

func TestRunCatchesCorruptionAcrossProcesses(t *testing.T) {
	spec := bench.Spec{Transport: "sm-corrupt", Pattern: bench.Bandwidth, Sizes: []int{4096}, Reps: 1, Iters: 4, Warmup: 1, Window: 4, Validate: true}
	_, err := bench.Run(context.Background(), spec, 0, launch.Hooks{})
	if err == nil || !strings.Contains(err.Error(), "payload validation failed") || !strings.Contains(err.Error(), "byte 3") {
		t.Fatalf("got %v, want payload validation failure at byte 3", err)
	}
}

func TestSpecErrorsNameTheField(t *testing.T) {
	cases := []struct {
		spec bench.Spec
		want string
	}{
		{bench.Spec{Transport: "nope", Pattern: bench.Latency, Sizes: []int{8}}, `unknown transport "nope"`},
		{bench.Spec{Transport: "sm", Pattern: "pingpong", Sizes: []int{8}}, `unknown pattern "pingpong"`},
		{bench.Spec{Transport: "sm", Pattern: bench.Latency}, "no message sizes"},
		{bench.Spec{Transport: "sm", Pattern: bench.Latency, Sizes: []int{8}, Reps: -1}, "reps=-1"},
		{bench.Spec{Transport: "sm", Pattern: bench.Latency, Sizes: []int{8}, Buffers: -2}, "buffers=-2"},
		{bench.Spec{Transport: "sm", Pattern: bench.Latency, Sizes: []int{8}, Settle: -1}, "settle=-1"},
		{bench.Spec{Transport: "sm", Pattern: bench.Bandwidth, Sizes: []int{8}, Window: 8, Buffers: 4, Validate: true}, "buffers=4 with validate"},
		{bench.Spec{Transport: "sm", Pattern: bench.Latency, Sizes: []int{8}, Options: transports.Options{"sm.dpeth": "4"}}, `unknown transport option "sm.dpeth"`},
	}
	for _, c := range cases {
		err := c.spec.Normalize()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.spec, err, c.want)
		}
	}
}

func TestParseSizes(t *testing.T) {
	cases := map[string]string{
		"1:8":                   "[1 2 4 8]",
		"0:4":                   "[0 1 2 4]",
		"4K:16K":                "[4096 8192 16384]",
		"8,64,1M":               "[8 64 1048576]",
		"1:4M":                  fmt.Sprint(ladder(1, 4<<20)),
		"8":                     "[8]",
		"16:8":                  "error",
		"x":                     "error",
		"1:2:3":                 "error",
		"8,,16":                 "error",
		"-4":                    "error",
		"1G":                    "[1073741824]",
		"3:10":                  "[3 6]",
		"1K:1K":                 "[1024]",
		"2k,3m":                 "[2048 3145728]",
		"1:0":                   "error",
		"64K:128K":              "[65536 131072]",
		"1:4611686018427387904": fmt.Sprint(ladder(1, 1<<62)),
		"1:9999999999G":         "error",
	}
	checkParses(t, "ParseSizes", bench.ParseSizes, cases)
}

// checkParses checks what parse, called name, makes of each input: its
// result as fmt.Sprint writes it, or "error".
func checkParses[T any](t *testing.T, name string, parse func(string) (T, error), cases map[string]string) {
	t.Helper()
	for in, want := range cases {
		got, err := parse(in)
		s := fmt.Sprint(got)
		if err != nil {
			s = "error"
		}
		if s != want {
			t.Errorf("%s(%q) = %s (%v), want %s", name, in, s, err, want)
		}
	}
}

func ladder(lo, hi int) []int {
	var s []int
	for n := lo; n <= hi && n > 0; n *= 2 {
		s = append(s, n)
	}
	return s
}

// kill -9 of a rank in the middle of a measurement: the run fails naming
// the rank, and no segment survives in /dev/shm.
func TestKilledBenchRankLeavesNoSegment(t *testing.T) {
	spec := bench.Spec{Transport: "sm", Pattern: bench.Bandwidth, Sizes: []int{1 << 20}, Reps: 1000, Iters: 1000, Window: 64, Backend: launch.Posix}
	_, err := bench.Run(context.Background(), spec, 0, launch.Hooks{Ready: func(pids []int) {
		syscall.Kill(pids[0], syscall.SIGKILL)
	}})
	if err == nil || !strings.Contains(err.Error(), "rank 0") || !strings.Contains(err.Error(), "signal 9") {
		t.Fatalf("got %v, want rank 0 killed by signal 9", err)
	}
	left, _ := filepath.Glob(filepath.Join(launch.ShmDir, launch.ShmPrefix+"*"))
	for _, l := range left {
		if strings.HasPrefix(filepath.Base(l), fmt.Sprintf("%s%d-", launch.ShmPrefix, os.Getpid())) {
			t.Errorf("segment left in /dev/shm: %s", l)
		}
	}
}

// A rank that stops making progress is caught by the watchdog, with the
// stacks that show where it hangs, and nothing of the run survives.
func TestHangIsCaughtWithStacks(t *testing.T) {
	spec := bench.Spec{Transport: "sm-hang", Pattern: bench.Latency, Sizes: []int{8}, Reps: 1000, Iters: 10, Warmup: 1}
	var pids []int
	_, err := bench.Run(context.Background(), spec, 500*time.Millisecond, launch.Hooks{
		Started: func(p []int) { pids = p }, Stderr: &strings.Builder{}})
	var se *launch.StallError
	if !errors.As(err, &se) || !strings.Contains(se.Stacks[1], "(*hanging).Recv") {
		t.Fatalf("got %v, want rank 1's stacks to show it stuck in (*hanging).Recv", err)
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) != syscall.ESRCH {
			t.Errorf("rank pid %d survived", pid)
		}
	}
}

// With Spec.Buffers the messages take that many distinct buffers in turn,
// in every pattern that sends a window, and validation still holds.
func TestBuffersAreTakenInTurn(t *testing.T) {
	for _, c := range []struct {
		pat             bench.Pattern
		buffers, window int
		want            int // distinct send buffers
	}{
		{bench.Latency, 3, 1, 3},
		{bench.Latency, 0, 1, 1},
		{bench.Bandwidth, 6, 4, 6},
		{bench.Bandwidth, 0, 4, 4}, // validating: one per window slot
		{bench.BiBandwidth, 5, 4, 5},
	} {
		t.Run(fmt.Sprintf("%s/%d", c.pat, c.buffers), func(t *testing.T) {
			spec := bench.Spec{Transport: "sm", Pattern: c.pat, Sizes: []int{64}, Reps: 1, Iters: 7, Warmup: 1,
				Window: c.window, Validate: true, Buffers: c.buffers}
			rec, _, err := recordRank0(t, spec)
			if err != nil {
				t.Fatal(err)
			}
			sent := rec.addrs[64]
			distinct := map[uintptr]bool{}
			perPass := (spec.Warmup + spec.Iters) * c.window // each pass starts again at the first buffer
			for k, a := range sent {
				distinct[a] = true
				if k%perPass >= c.want && a != sent[k-c.want] {
					t.Fatalf("message %d from %#x, message %d from %#x: not in turn over %d buffers", k, a, k-c.want, sent[k-c.want], c.want)
				}
			}
			if len(sent) < 2*c.want || len(distinct) != c.want {
				t.Errorf("%d distinct send buffers over %d messages, want %d", len(distinct), len(sent), c.want)
			}
		})
	}
}

// payloadRecorder notes every buffer handed to Isend or Send: its length,
// its address, and a copy of the first of each length (what leaves); and
// a copy of the first buffer of each length handed to Irecv or Recv (what
// the receive buffer held before the transport wrote it).
type payloadRecorder struct {
	transports.Transport
	sent, posted map[int][]byte
	addrs        map[int][]uintptr // per length, in order
	sizes        []int             // lengths sent, in order (zero-byte ones left out)
}

func newPayloadRecorder(tr transports.Transport) *payloadRecorder {
	return &payloadRecorder{Transport: tr, sent: map[int][]byte{}, posted: map[int][]byte{}, addrs: map[int][]uintptr{}}
}

func (p *payloadRecorder) send(buf []byte) {
	if len(buf) == 0 { // the zero-byte messages that line the ranks up
		return
	}
	p.sizes = append(p.sizes, len(buf))
	p.addrs[len(buf)] = append(p.addrs[len(buf)], sys.AddressOf(buf))
	if _, ok := p.sent[len(buf)]; !ok {
		p.sent[len(buf)] = slices.Clone(buf)
	}
}

func (p *payloadRecorder) post(buf []byte) {
	if _, ok := p.posted[len(buf)]; !ok {
		p.posted[len(buf)] = slices.Clone(buf)
	}
}

func (p *payloadRecorder) Send(peer int, buf []byte) error {
	p.send(buf)
	return p.Transport.Send(peer, buf)
}

func (p *payloadRecorder) Isend(peer int, buf []byte) (transports.Request, error) {
	p.send(buf)
	return p.Transport.Isend(peer, buf)
}

func (p *payloadRecorder) Recv(peer int, buf []byte) (int, error) {
	p.post(buf)
	return p.Transport.Recv(peer, buf)
}

func (p *payloadRecorder) Irecv(peer int, buf []byte) (transports.Request, error) {
	p.post(buf)
	return p.Transport.Irecv(peer, buf)
}

// recordRank0 runs spec in process with rank 0's transport behind a
// payloadRecorder.
func recordRank0(t *testing.T, spec bench.Spec) (*payloadRecorder, []bench.Point, error) {
	t.Helper()
	var rec *payloadRecorder
	pts, err := inProcess(t, spec, func(rank int, tr transports.Transport) transports.Transport {
		if rank != 0 {
			return tr
		}
		rec = newPayloadRecorder(tr)
		return rec
	})
	return rec, pts, err
}

// allBytes reports whether b is non-empty and every byte of it is c.
func allBytes(b []byte, c byte) bool {
	return len(b) > 0 && !slices.ContainsFunc(b, func(x byte) bool { return x != c })
}

// Without validation the payload is what OSU sends: send buffers of 'a's,
// receive buffers of 'b's, never the zeros of fresh pages.
func TestPayloadsAreFilledAsOSU(t *testing.T) {
	for _, c := range []struct {
		pat     bench.Pattern
		buffers int
	}{{bench.Latency, 0}, {bench.Bandwidth, 0}, {bench.Bandwidth, 3}, {bench.BiBandwidth, 0}} {
		t.Run(fmt.Sprintf("%s/%d", c.pat, c.buffers), func(t *testing.T) {
			const size = 100000
			spec := bench.Spec{Transport: "sm", Pattern: c.pat, Sizes: []int{size}, Reps: 1, Iters: 3, Warmup: 1, Window: 4, Buffers: c.buffers}
			var recs [2]*payloadRecorder
			_, err := inProcess(t, spec, func(rank int, tr transports.Transport) transports.Transport {
				recs[rank] = newPayloadRecorder(tr)
				return recs[rank]
			})
			if err != nil {
				t.Fatal(err)
			}
			if !allBytes(recs[0].sent[size], bench.SendFill) {
				t.Errorf("rank 0 sent a %d-byte payload that is not all %q", size, bench.SendFill)
			}
			if !allBytes(recs[1].posted[size], bench.RecvFill) {
				t.Errorf("rank 1 posted a %d-byte receive buffer that is not all %q", size, bench.RecvFill)
			}
		})
	}
}

// A settling pass goes first, at its own size, and yields no point.
func TestSettlingPassIsNotReported(t *testing.T) {
	for _, pat := range []bench.Pattern{bench.Latency, bench.Bandwidth} {
		t.Run(string(pat), func(t *testing.T) {
			spec := bench.Spec{Transport: "sm", Pattern: pat, Sizes: []int{64, 4096}, Reps: 2, Iters: 5, Warmup: 1, Window: 4, Settle: 1 << 20}
			rec, pts, err := recordRank0(t, spec)
			if err != nil {
				t.Fatal(err)
			}
			checkPoints(t, spec, pts)
			window := spec.Window
			if pat == bench.Latency {
				window = 1
			}
			want := (spec.Warmup + spec.Iters) * window // one pass
			if n := slices.Index(rec.sizes, 64); n != want || slices.Contains(rec.sizes[n:], spec.Settle) {
				t.Errorf("sent sizes %v: want %d messages of %d bytes first, then none", rec.sizes, want, spec.Settle)
			}
		})
	}
}

// A settling pass runs at most its size's built-in iterations, whatever
// the spec asks of the measured sizes.
func TestSettlingPassKeepsItsSizesIterations(t *testing.T) {
	spec := bench.Spec{Transport: "sm", Pattern: bench.Bandwidth, Sizes: []int{64}, Reps: 1, Iters: 500, Warmup: 1, Window: 4, Settle: 1 << 20}
	rec, _, err := recordRank0(t, spec)
	if err != nil {
		t.Fatal(err)
	}
	iters, warmup := bench.DefaultIters(spec.Pattern, spec.Settle)
	want := (min(spec.Warmup, warmup) + iters) * spec.Window
	if n := slices.Index(rec.sizes, 64); n != want {
		t.Errorf("%d messages of the settling size %d before the first measured one, want %d (its built-in %d iterations)", n, spec.Settle, want, iters)
	}
}

// mustRun runs spec on this host, failing the test on an error.
func mustRun(t *testing.T, spec bench.Spec) bench.Result {
	t.Helper()
	res, err := bench.Run(context.Background(), spec, 0, launch.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
