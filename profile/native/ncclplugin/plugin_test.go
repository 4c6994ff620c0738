package ncclplugin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
)

// host is a fake NCCL: it loads the plugin as NCCL does (dlopen, one of
// the exported structures) and calls its entry points with cost tables
// laid out as NCCL's, float[algorithms][protocols].
type host struct {
	t                      testing.TB
	init, decide, finalize uintptr
	version                string
	nAlgo, nProto          int
}

var (
	built     string
	buildErr  error
	buildOnce sync.Once
)

// TestMain removes the plugin that plugin built for the whole test binary.
func TestMain(m *testing.M) {
	code := m.Run()
	if built != "" {
		os.RemoveAll(filepath.Dir(built))
	}
	os.Exit(code)
}

// plugin builds the plugin once per test binary and loads symbol from it.
func plugin(t testing.TB, symbol string) *host {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gotune-nccl-plugin-")
		if err != nil {
			buildErr = err
			return
		}
		built, buildErr = Build(context.Background(), dir)
	})
	if errors.Is(buildErr, sys.ErrNotSupported) {
		testutil.SkipUnless(t, "cc", buildErr)
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	lib, err := purego.Dlopen(built, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatal(err)
	}
	sym, err := purego.Dlsym(lib, symbol)
	if err != nil {
		t.Fatalf("%s: %v", symbol, err)
	}
	// The structure's first words: name, init, getCollInfo, finalize (v4:
	// destroy); memory of the library, not Go's.
	fns := (*[4]uintptr)(unsafe.Add(nil, sym))
	return &host{t: t, init: fns[1], decide: fns[2], finalize: fns[3], version: symbol[len(symbol)-2:], nAlgo: len(Algorithms), nProto: len(Protocols)}
}

// start initialises a communicator of ranks ranks with the table text
// (none: "" leaves GOTUNE_NCCL_TABLE unset).
func (h *host) start(ranks int, table string) uintptr {
	h.t.Helper()
	if table != "" {
		path := filepath.Join(h.t.TempDir(), "table")
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			h.t.Fatal(err)
		}
		h.t.Setenv(TableEnv, path)
	} else {
		h.t.Setenv(TableEnv, "")
	}
	var ctx uintptr
	var r uintptr
	if h.version == "v4" {
		r, _, _ = purego.SyscallN(h.init, uintptr(ranks), 1, 0, uintptr(unsafe.Pointer(&ctx)))
	} else {
		r, _, _ = purego.SyscallN(h.init, uintptr(unsafe.Pointer(&ctx)), 0xc0ffee, uintptr(ranks), 1, 0, 0, 0)
	}
	if int32(r) != 0 {
		h.t.Fatalf("init: result %d, want success", int32(r))
	}
	return ctx
}

// costs is a cost table where every combination costs 10, except the
// unavailable ones (-1).
func (h *host) costs(unavailable ...[2]int) []float32 {
	c := make([]float32, h.nAlgo*h.nProto)
	for i := range c {
		c[i] = 10
	}
	for _, u := range unavailable {
		c[u[0]*h.nProto+u[1]] = -1
	}
	return c
}

// call asks the plugin about one collective and returns what NCCL would
// take: the cheapest combination and the channel count (0: unchanged).
func (h *host) call(ctx uintptr, coll string, bytes int, costs []float32) (algo, proto string, channels int) {
	h.t.Helper()
	var ch int32
	// NCCL passes its float[algorithms][protocols] array cast to float**.
	r, _, _ := purego.SyscallN(h.decide, ctx, uintptr(slices.Index(Collectives, coll)), uintptr(bytes), 1,
		uintptr(unsafe.Pointer(&costs[0])), uintptr(h.nAlgo), uintptr(h.nProto), 0, uintptr(unsafe.Pointer(&ch)))
	if int32(r) != 0 {
		h.t.Fatalf("getCollInfo: result %d, want success", int32(r))
	}
	best, at := float32(math.MaxFloat32), -1
	for i, c := range costs {
		if c >= 0 && c < best {
			best, at = c, i
		}
	}
	if best != 0 {
		return Keep, Keep, int(ch)
	}
	return Algorithms[at/h.nProto], Protocols[at%h.nProto], int(ch)
}

func (h *host) end(ctx uintptr) {
	h.t.Helper()
	if r, _, _ := purego.SyscallN(h.finalize, ctx); int32(r) != 0 {
		h.t.Fatalf("finalize: result %d, want success", int32(r))
	}
}

const table = `# a table as WriteTable writes it
allreduce 0 65535 2 tree ll 0
allreduce 65536 1048576 2 ring ll128 8
allreduce 0 1073741824 4 ring simple 0
allgather 0 4096 0 - - 2
broadcast 0 1048576 0 nvls simple 0
`

// Every ABI the plugin exports decides calls by the first matching rule,
// and leaves to NCCL what no rule matches, what a rule may not take (an
// unavailable combination) and everything when it has no table.
func TestPluginAppliesTheTable(t *testing.T) {
	for _, symbol := range Symbols {
		t.Run(symbol, func(t *testing.T) {
			h := plugin(t, symbol)
			two := h.start(2, table)
			defer h.end(two)
			four := h.start(4, table)
			defer h.end(four)
			for _, tc := range []struct {
				name        string
				ctx         uintptr
				coll        string
				bytes       int
				unavailable [][2]int
				algo, proto string
				channels    int
			}{
				{"first rule", two, "allreduce", 8, nil, "tree", "ll", 0},
				{"its last byte", two, "allreduce", 65535, nil, "tree", "ll", 0},
				{"second rule, channels too", two, "allreduce", 65536, nil, "ring", "ll128", 8},
				{"past every range", two, "allreduce", 1 << 21, nil, Keep, Keep, 0},
				{"another communicator size", four, "allreduce", 8, nil, "ring", "simple", 0},
				{"channels only", four, "allgather", 4096, nil, Keep, Keep, 2},
				{"no rule for the collective", two, "reducescatter", 8, nil, Keep, Keep, 0},
				{"an unavailable combination", two, "broadcast", 1024, [][2]int{{4, 2}}, Keep, Keep, 0},
				{"unavailable elsewhere only", two, "broadcast", 1024, [][2]int{{0, 0}}, "nvls", "simple", 0},
			} {
				algo, proto, ch := h.call(tc.ctx, tc.coll, tc.bytes, h.costs(tc.unavailable...))
				if algo != tc.algo || proto != tc.proto || ch != tc.channels {
					t.Errorf("%s (%s %d bytes): %s/%s, %d channels; want %s/%s, %d", tc.name, tc.coll, tc.bytes, algo, proto, ch, tc.algo, tc.proto, tc.channels)
				}
			}
			none := h.start(2, "")
			defer h.end(none)
			if algo, _, ch := h.call(none, "allreduce", 8, h.costs()); algo != Keep || ch != 0 {
				t.Errorf("without a table: %s, %d channels; want NCCL's choice", algo, ch)
			}
		})
	}
}

// Lines that are not rules are skipped (NCCL must not fail on a bad table)
// while the rules around them apply; a table that cannot be opened is no
// table.
func TestPluginSkipsWhatIsNotARule(t *testing.T) {
	h := plugin(t, "ncclTunerPlugin_v5")
	ctx := h.start(2, "allreduce 0 10 2 tree ll\nallreduce 0 10 2 tree\nallreduce 0 10 2 ring ll 0 extra\nallreduce 10 0 2 ring ll 0\nallreduce 0 10 2 ring - 0\nsendrecv 0 10 2 ring ll 0\n\n   # indented comment\r\nallreduce 0 100 0 pat simple 0\r\n")
	defer h.end(ctx)
	if algo, proto, _ := h.call(ctx, "allreduce", 5, h.costs()); algo != "pat" || proto != "simple" {
		t.Errorf("got %s/%s, want pat/simple from the only rule", algo, proto)
	}
	t.Setenv(TableEnv, filepath.Join(t.TempDir(), "missing"))
	var missing uintptr
	if r, _, _ := purego.SyscallN(h.init, uintptr(unsafe.Pointer(&missing)), 1, 2, 1, 0, 0, 0); int32(r) != 0 {
		t.Fatalf("init with a missing table: result %d", int32(r))
	}
	defer h.end(missing)
	if algo, _, _ := h.call(missing, "allreduce", 5, h.costs()); algo != Keep {
		t.Errorf("with a missing table: %s, want NCCL's choice", algo)
	}
}

// finalize appends the communicator's counts to GOTUNE_NCCL_TUNER_STATS.
func TestPluginCountsItsDecisions(t *testing.T) {
	h := plugin(t, "ncclTunerPlugin_v6")
	stats := filepath.Join(t.TempDir(), "stats")
	t.Setenv(StatsEnv, stats)
	ctx := h.start(2, table)
	h.call(ctx, "allreduce", 8, h.costs())
	h.call(ctx, "allreduce", 1<<30, h.costs())
	h.call(ctx, "broadcast", 8, h.costs([2]int{4, 2}))
	h.end(ctx)
	b, err := os.ReadFile(stats)
	if err != nil {
		t.Fatal(err)
	}
	if want := "comm c0ffee ranks 2 rules 4 calls 3 decided 1 channels 0 unavailable 1\n"; string(b) != want {
		t.Errorf("stats %q, want %q", b, want)
	}
}

// What WriteTable writes, ReadTable and the plugin read back; a rule that
// could not mean what it says is refused, naming the rule or the line.
func TestTableRoundTrip(t *testing.T) {
	rules := []Rule{
		{Collective: "allreduce", Min: 0, Max: 65535, Ranks: 2, Algorithm: "tree", Protocol: "ll"},
		{Collective: "allgather", Min: 0, Max: 4096, Algorithm: Keep, Protocol: Keep, Channels: 2},
	}
	var b strings.Builder
	if err := WriteTable(&b, "profile abc", rules); err != nil {
		t.Fatal(err)
	}
	got, err := ReadTable(strings.NewReader(b.String()), "table")
	if err != nil || !slices.Equal(got, rules) {
		t.Fatalf("read back %+v, %v; want %+v", got, err, rules)
	}
	for _, bad := range []struct {
		rule Rule
		want string
	}{
		{Rule{Collective: "sendrecv", Algorithm: "ring", Protocol: "ll"}, "collective"},
		{Rule{Collective: "allreduce", Algorithm: "ring", Protocol: Keep}, "both or neither"},
		{Rule{Collective: "allreduce", Algorithm: "ring", Protocol: "ll", Min: 5, Max: 4}, "min <= max"},
		{Rule{Collective: "allreduce", Algorithm: Keep, Protocol: Keep}, "changes nothing"},
		{Rule{Collective: "allreduce", Algorithm: "nvlstree", Protocol: "ll"}, "algorithm"},
	} {
		if err := WriteTable(&b, "", []Rule{bad.rule}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want an error saying %q", bad.rule, err, bad.want)
		}
	}
	if _, err := ReadTable(strings.NewReader("# x\nallreduce 0 10 2 ring ll\n"), "t.txt"); err == nil || !strings.Contains(err.Error(), "t.txt:2:") {
		t.Errorf("a short line: %v, want an error naming t.txt:2", err)
	}
}

// BenchmarkPluginLookup times getCollInfo as NCCL calls it, from the C
// host testdata/fakehost.c (so no Go call cost is counted), against a
// table of 80 rules (five collectives, eight size ranges, two
// communicator sizes), asking for the last range, the slowest lookup.
// p50-ns and p99-ns are single calls, less the clock's own cost.
func BenchmarkPluginLookup(b *testing.B) {
	plugin(b, "ncclTunerPlugin_v5") // built
	host := filepath.Join(b.TempDir(), "fakehost")
	if out, err := exec.Command("cc", "-O2", "-o", host, "testdata/fakehost.c", "-ldl").CombinedOutput(); err != nil {
		b.Fatalf("build the fake host: %v\n%s", err, out)
	}
	var rules []Rule
	for _, ranks := range []int{4, 2} {
		for _, c := range Collectives {
			for k := range 8 {
				rules = append(rules, Rule{Collective: c, Min: int64(k) << 20, Max: int64(k+1)<<20 - 1, Ranks: ranks, Algorithm: "ring", Protocol: "simple"})
			}
		}
	}
	var t strings.Builder
	if err := WriteTable(&t, "benchmark", rules); err != nil {
		b.Fatal(err)
	}
	table := filepath.Join(b.TempDir(), "table")
	if err := os.WriteFile(table, []byte(t.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cmd := exec.Command(host, built, strconv.Itoa(max(b.N, 100)), strconv.Itoa(slices.Index(Collectives, "allreduce")), strconv.Itoa(8<<20-1), "2")
	cmd.Env = append(os.Environ(), TableEnv+"="+table)
	out, err := cmd.Output()
	b.StopTimer()
	if err != nil {
		b.Fatalf("fake host: %v", err)
	}
	var calls, clock, p50, p99, most int64
	if _, err := fmt.Sscanf(string(out), "calls %d clock %d p50 %d p99 %d max %d", &calls, &clock, &p50, &p99, &most); err != nil {
		b.Fatalf("fake host said %q: %v", out, err)
	}
	b.ReportMetric(float64(p50), "p50-ns")
	b.ReportMetric(float64(p99), "p99-ns")
}
