package transporttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
)

// Main registers kinds (a rank function by job kind), runs this process as
// a rank when a job's launcher started it so, and the tests otherwise. A
// test binary's TestMain calls it.
func Main(m *testing.M, kinds map[string]launch.Func) {
	for kind, f := range kinds {
		launch.Register(kind, f)
	}
	launch.MaybeRunRank()
	os.Exit(m.Run())
}

// Job is a rank test: Size ranks of the test binary running Kind's function.
type Job struct {
	Kind    string
	Size    int // ranks; 0 means 2
	Params  any // the scenario, as JSON for launch.Rank.Params; nil: none
	Segment int // bytes of the shared segment (0: none)
	// Stall is each rank's deadline: a rank whose heartbeat (launch.Rank.Beat;
	// one that never beats, from its start) stays still this long is killed
	// with its stacks and fails the job. 0 means DefaultStall; <0: none.
	Stall time.Duration
	// Deadline bounds the whole job: its ranks are killed when it passes
	// and the job fails. 0 leaves the test binary's own deadline, less a
	// grace to report the failure, as the only bound.
	Deadline time.Duration
	Stderr   io.Writer // the ranks' output (nil: this process's stderr)
	// Needs names the capability (GOTUNE_REQUIRE's spelling) without which
	// the job's transport cannot start: a job failing with ErrNotSupported
	// skips the test, or fails it where GOTUNE_REQUIRE names Needs. "": never.
	Needs string
}

// DefaultStall is a rank's deadline where a job sets none.
const DefaultStall = time.Minute

// reportGrace is how long before the test binary's deadline a job's ranks
// are killed, so that the test reports the hang itself.
const reportGrace = 10 * time.Second

// Start runs j and returns what every rank returned, or the job's error.
func Start(t testing.TB, j Job) (launch.Result, error) {
	t.Helper()
	var params json.RawMessage
	if j.Params != nil {
		var err error
		if params, err = json.Marshal(j.Params); err != nil {
			t.Fatalf("%s: scenario: %v", j.Kind, err)
		}
	}
	size := j.Size
	if size == 0 {
		size = 2
	}
	ctx, cancel := jobContext(t, j.Deadline)
	defer cancel()
	stall := j.Stall
	switch {
	case stall == 0:
		stall = DefaultStall
	case stall < 0:
		stall = 0
	}
	res, err := launch.Run(ctx, launch.Job{Kind: j.Kind, Size: size, SegmentBytes: j.Segment, Params: params, Stall: stall},
		launch.Hooks{Stderr: j.Stderr})
	if err != nil && j.Needs != "" && errors.Is(err, sys.ErrNotSupported) {
		testutil.SkipUnless(t, j.Needs, err)
	}
	return res, err
}

// jobContext ends at the job's deadline, or before the test binary's own.
func jobContext(t testing.TB, deadline time.Duration) (context.Context, context.CancelFunc) {
	end := time.Time{}
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if at, ok := d.Deadline(); ok {
			end = at.Add(-reportGrace)
		}
	}
	if deadline > 0 && (end.IsZero() || time.Now().Add(deadline).Before(end)) {
		end = time.Now().Add(deadline)
	}
	if end.IsZero() {
		return context.WithCancel(context.Background())
	}
	return context.WithDeadline(context.Background(), end)
}

// Run runs j and fails the test when the job fails.
func Run(t testing.TB, j Job) launch.Result {
	t.Helper()
	res, err := Start(t, j)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Results runs j, fails the test when it fails, and decodes every rank's
// result as a T, by rank.
func Results[T any](t testing.TB, j Job) []T {
	t.Helper()
	return Decode[T](t, Run(t, j))
}

// Decode decodes every rank's result in res as a T, by rank.
func Decode[T any](t testing.TB, res launch.Result) []T {
	t.Helper()
	out := make([]T, len(res))
	for r, raw := range res {
		if err := json.Unmarshal(raw, &out[r]); err != nil {
			t.Fatalf("rank %d's result %s: %v", r, raw, err)
		}
	}
	return out
}

// SharedBytes is the shared segment the named transport needs for size
// ranks under opts.
func SharedBytes(t testing.TB, name string, size int, opts transports.Options) int {
	t.Helper()
	d, err := transports.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	n, err := d.SharedBytes(size, opts)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Params decodes the scenario a rank was given.
func Params[P any](r *launch.Rank) (P, error) {
	var p P
	err := r.Params(&p)
	return p, err
}

// Env is the environment a rank offers a transport: everything the
// launcher told it, and opts.
func Env(r *launch.Rank, opts transports.Options) transports.Env {
	return transports.Env{Rank: r.ID, Size: r.Size, PIDs: r.PIDs, Segment: r.Segment, Options: opts, Token: r.Token,
		AllGather: r.AllGather, Hosts: r.Hosts, Addr: r.Addr}
}

// Open starts the named transport in a rank, as a job does: its driver's
// New on env, then its Check. The transport is returned with Check's
// error, for the caller to close.
func Open(name string, env transports.Env) (transports.Transport, error) {
	d, err := transports.Lookup(name)
	if err != nil {
		return nil, err
	}
	t, err := d.New(env)
	if err != nil || d.Check == nil {
		return t, err
	}
	return t, d.Check(t, env)
}

// OpenScenario decodes a rank's scenario and opens the named transport
// (Open) in the environment env gives for it, as a T.
func OpenScenario[T transports.Transport, P any](r *launch.Rank, name string, env func(P) transports.Env) (T, P, error) {
	var t T
	p, err := Params[P](r)
	if err != nil {
		return t, p, err
	}
	tr, err := Open(name, env(p))
	t, _ = tr.(T)
	return t, p, err
}

// Peer is the other rank of a pair.
func Peer(r *launch.Rank) int { return 1 - r.ID }

// Output collects the ranks' output; ranks write to it concurrently.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) { o.mu.Lock(); defer o.mu.Unlock(); return o.b.Write(p) }

// String is what the ranks have written so far.
func (o *Output) String() string { o.mu.Lock(); defer o.mu.Unlock(); return o.b.String() }

// Devices lists the devices a test of a kernel-module transport runs on:
// its fake always, and the module's real device where probeErr (probing
// it) is nil. Where GOTUNE_REQUIRE names capability, a missing module
// fails the test.
func Devices(t testing.TB, capability, fake, real string, probeErr error) []string {
	t.Helper()
	if probeErr == nil {
		return []string{fake, real}
	}
	if testutil.Required(capability) {
		t.Fatalf("%s required by GOTUNE_REQUIRE but unavailable: %v", capability, probeErr)
	}
	t.Logf("real device skipped: %v", probeErr)
	return []string{fake}
}
