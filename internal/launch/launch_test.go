package launch

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/gotune/gotune/internal/sys"
)

func TestMain(m *testing.M) {
	Register("echo-segment", func(r *Rank) (any, error) {
		// Rank 0 writes through the segment; the others read it back.
		word := (*uint64)(unsafe.Pointer(&r.Segment[0]))
		if r.ID == 0 {
			atomic.StoreUint64(word, 0xfeedface)
		}
		if err := r.Barrier(); err != nil {
			return nil, err
		}
		return map[string]any{"rank": r.ID, "pid": os.Getpid(), "word": atomic.LoadUint64(word)}, nil
	})
	Register("chatty", func(r *Rank) (any, error) {
		for range 100 {
			fmt.Fprintf(os.Stderr, "rank %d says hello\n", r.ID)
		}
		return nil, nil
	})
	Register("block", func(r *Rank) (any, error) {
		var m message
		return nil, r.dec.Decode(&m) // nothing ever comes: blocks until killed
	})
	Register("fail-rank1", func(r *Rank) (any, error) {
		if r.ID == 1 {
			return nil, errors.New("planted failure")
		}
		var m message
		return nil, r.dec.Decode(&m)
	})
	Register("peer-reports-death", func(r *Rank) (any, error) {
		// Rank 0 dies by SIGKILL; rank 1 sees the death first-hand and
		// reports it, racing the launcher's reaping of rank 0.
		if err := r.Barrier(); err != nil {
			return nil, err
		}
		if r.ID == 0 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		if err := sys.WaitProcessExit(r.PIDs[0], time.Minute); err != nil {
			return nil, err
		}
		return nil, errors.New("peer rank 0 has exited")
	})
	Register("vanish", func(r *Rank) (any, error) {
		os.Exit(0)
		return nil, nil
	})
	Register("vanish-rank1", func(r *Rank) (any, error) {
		if r.ID == 1 {
			os.Exit(0)
		}
		var m message
		return nil, r.dec.Decode(&m) // waits for a peer that is gone
	})
	Register("allgather", func(r *Rank) (any, error) {
		// Two rounds, the first with an empty blob on rank 1: the rounds
		// stay apart and an empty blob stays present.
		var out [][][]byte
		for round := range 2 {
			blob := []byte(fmt.Sprintf("rank %d round %d", r.ID, round))
			if round == 0 && r.ID == 1 {
				blob = nil
			}
			all, err := r.AllGather(blob)
			if err != nil {
				return nil, err
			}
			out = append(out, all)
		}
		return out, nil
	})
	Register("block-rank1", func(r *Rank) (any, error) {
		if r.ID == 1 {
			var m message
			return nil, r.dec.Decode(&m) // nothing ever comes: blocks until killed
		}
		for { // rank 0 keeps making progress until the job is killed
			r.Beat()
			time.Sleep(time.Millisecond)
		}
	})
	Register("whereami", func(r *Rank) (any, error) {
		return map[string]any{"hosts": r.Hosts, "addr": r.Addr, "pid": os.Getpid(), "pids": r.PIDs}, nil
	})
	if v, ok := os.LookupEnv(intrudeEnv); ok {
		var tg targets
		if err := json.Unmarshal([]byte(v), &tg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		json.NewEncoder(os.Stdout).Encode(intrude(tg))
		os.Exit(0)
	}
	Register("intruder", intruderRank)
	Register("strangers", func(r *Rank) (any, error) {
		// Rank 0 knocks as strangers would, each knock on a connection of
		// its own, and waits for the launcher to close it.
		if r.ID != 0 {
			return "ok", nil
		}
		wrong, _ := json.Marshal(message{Op: "hello", Token: "not the job's", Rank: 1})
		for _, knock := range [][]byte{
			[]byte("GET / HTTP/1.0\r\n\r\n"),
			append(wrong, '\n'),
			append([]byte(`{"op":"hello","token":"`), bytes.Repeat([]byte("x"), helloBytes+1024)...),
		} {
			network, addr := bootstrapAddr(os.Getenv(envBoot))
			c, err := net.Dial(network, addr)
			if err != nil {
				return nil, err
			}
			c.Write(knock) // the launcher may close it before the end
			io.Copy(io.Discard, c)
			c.Close()
		}
		return "ok", nil
	})
	MaybeRunRank()
	os.Exit(m.Run())
}

// Strangers on the bootstrap socket (garbage, a wrong token, a hello that
// never ends) are refused and logged; they neither join nor end the job.
func TestStrangersAreRefused(t *testing.T) {
	var out bytes.Buffer
	res, err := Run(context.Background(), Job{Kind: "strangers", Size: 2}, Hooks{Stderr: &out})
	if err != nil {
		t.Fatalf("the job failed: %v\n%s", err, out.String())
	}
	if len(res) != 2 || string(res[0]) != `"ok"` {
		t.Errorf("results %s", res)
	}
	for _, want := range []string{"no hello", "wrong job token", "first 65536 bytes"} {
		if !strings.Contains(out.String(), "refused a bootstrap connection") || !strings.Contains(out.String(), want) {
			t.Errorf("stderr does not say a connection was refused for %q:\n%s", want, out.String())
		}
	}
}

// A stranger that connects and says nothing does not hold the launcher:
// once the bootstrap closes, so does its connection.
func TestSilentStrangerIsClosed(t *testing.T) {
	j := newRunning(Job{Kind: "test", Size: 1}, "t", io.Discard)
	near, far := net.Pipe()
	defer far.Close()
	done := make(chan struct{})
	go func() {
		j.serve(near)
		close(done)
	}()
	j.closeStrangers()
	<-done // a serve that waited for the hello would never return
	if j.hold(far) {
		t.Error("a connection was held after the bootstrap closed")
	}
}

// ourSegments lists POSIX segments made by this process's launches.
func ourSegments(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(ShmDir, fmt.Sprintf("%s%d-*", ShmPrefix, os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func assertGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			t.Errorf("rank pid %d still exists (kill 0: %v)", pid, err)
		}
	}
	if left := ourSegments(t); len(left) > 0 {
		t.Errorf("segments left behind: %v", left)
	}
}

func TestSegmentSharedAcrossRanks(t *testing.T) {
	for _, backend := range []string{Memfd, Posix} {
		t.Run(backend, func(t *testing.T) {
			var pids []int
			res, err := Run(context.Background(), Job{Kind: "echo-segment", Size: 3, SegmentBytes: 4096, Backend: backend},
				Hooks{Started: func(p []int) { pids = p }})
			if err != nil {
				t.Fatal(err)
			}
			for r, raw := range res {
				var got struct {
					Rank, PID int
					Word      uint64
				}
				if err := json.Unmarshal(raw, &got); err != nil {
					t.Fatal(err)
				}
				if got.Rank != r || got.PID != pids[r] || got.Word != 0xfeedface {
					t.Errorf("rank %d reported %+v (pid want %d)", r, got, pids[r])
				}
			}
			assertGone(t, pids)
		})
	}
}

// kill -9 of a rank, before it maps the segment and while it holds it: the
// launcher reports it, kills the rest and leaves nothing in /dev/shm.
func TestAllGather(t *testing.T) {
	const size = 3
	res, err := Run(context.Background(), Job{Kind: "allgather", Size: size}, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	for r, raw := range res {
		var rounds [][][]byte
		if err := json.Unmarshal(raw, &rounds); err != nil {
			t.Fatal(err)
		}
		for round, all := range rounds {
			if len(all) != size {
				t.Fatalf("rank %d round %d: %d blobs", r, round, len(all))
			}
			for p, b := range all {
				want := fmt.Sprintf("rank %d round %d", p, round)
				if round == 0 && p == 1 {
					want = ""
				}
				if string(b) != want {
					t.Errorf("rank %d round %d: blob of rank %d is %q, want %q", r, round, p, b, want)
				}
			}
		}
	}
}

func TestKilledRankLeavesNothing(t *testing.T) {
	for _, backend := range []string{Memfd, Posix} {
		for _, when := range []string{"started", "ready"} {
			t.Run(backend+"/"+when, func(t *testing.T) {
				var pids []int
				sawSegment := backend != Posix || when == "ready"
				kill := func(p []int) {
					pids = p
					if backend == Posix && when == "started" {
						sawSegment = len(ourSegments(t)) == 1
					}
					syscall.Kill(p[1], syscall.SIGKILL)
				}
				hooks := Hooks{}
				if when == "started" {
					hooks.Started = kill
				} else {
					hooks.Ready = kill
				}
				_, err := Run(context.Background(), Job{Kind: "block", Size: 2, SegmentBytes: 1 << 20, Backend: backend}, hooks)
				if err == nil || !strings.Contains(err.Error(), "rank 1") || !strings.Contains(err.Error(), "killed by signal 9") {
					t.Fatalf("got error %v, want rank 1 killed by signal 9", err)
				}
				if !sawSegment {
					t.Error("posix segment did not exist while the job ran")
				}
				assertGone(t, pids)
			})
		}
	}
}

// A rank killed from outside is the job's error even when a peer reports
// the death before the launcher has reaped the dead rank.
func TestKilledRankIsTheCausePeersReport(t *testing.T) {
	for i := range 10 {
		_, err := Run(context.Background(), Job{Kind: "peer-reports-death", Size: 2}, Hooks{})
		if err == nil || !strings.Contains(err.Error(), "rank 0") || !strings.Contains(err.Error(), "killed by signal 9") {
			t.Fatalf("run %d: got %v, want rank 0 killed by signal 9", i, err)
		}
	}
}

func TestFailingRankEndsJob(t *testing.T) {
	var pids []int
	_, err := Run(context.Background(), Job{Kind: "fail-rank1", Size: 2}, Hooks{Started: func(p []int) { pids = p }})
	if err == nil || !strings.Contains(err.Error(), "planted failure") {
		t.Fatalf("got %v, want the planted failure", err)
	}
	assertGone(t, pids)
}

func TestRankWithoutResultIsAnError(t *testing.T) {
	_, err := Run(context.Background(), Job{Kind: "vanish", Size: 2}, Hooks{})
	if err == nil || !strings.Contains(err.Error(), "without a result") {
		t.Fatalf("got %v, want an exit without result", err)
	}
}

// One rank exits 0 without a result while its peer waits: the job fails at
// once instead of hanging until a timeout.
func TestRankVanishingWhileOthersWait(t *testing.T) {
	var pids []int
	_, err := Run(context.Background(), Job{Kind: "vanish-rank1", Size: 2}, Hooks{Started: func(p []int) { pids = p }})
	if err == nil || !strings.Contains(err.Error(), "rank 1") || !strings.Contains(err.Error(), "without a result") {
		t.Fatalf("got %v, want rank 1 gone without a result", err)
	}
	assertGone(t, pids)
}

// Ranks writing to one shared, non-file writer: nothing is lost.
func TestSharedStderrWriter(t *testing.T) {
	var buf bytes.Buffer
	if _, err := Run(context.Background(), Job{Kind: "chatty", Size: 4}, Hooks{Stderr: &buf}); err != nil {
		t.Fatal(err)
	}
	for r := range 4 {
		if got := strings.Count(buf.String(), fmt.Sprintf("rank %d says hello\n", r)); got != 100 {
			t.Errorf("rank %d: %d of 100 lines arrived", r, got)
		}
	}
}

func TestCancelKillsRanks(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	var pids []int
	_, err := Run(ctx, Job{Kind: "block", Size: 2, SegmentBytes: 4096, Backend: Posix},
		Hooks{Ready: func(p []int) { pids = p; cancel(errors.New("watchdog")) }})
	if err == nil || !strings.Contains(err.Error(), "watchdog") {
		t.Fatalf("got %v, want the cancel cause", err)
	}
	assertGone(t, pids)
}

func TestUnknownKindAndBadInput(t *testing.T) {
	if _, err := Run(context.Background(), Job{Kind: "no-such-kind", Size: 2}, Hooks{}); err == nil || !strings.Contains(err.Error(), `unknown job kind "no-such-kind"`) {
		t.Errorf("unknown kind: got %v", err)
	}
	if _, err := Run(context.Background(), Job{Kind: "echo-segment", Size: 2, Backend: "sysv", SegmentBytes: 8}, Hooks{}); err == nil || !strings.Contains(err.Error(), `"sysv"`) {
		t.Errorf("bad backend: got %v", err)
	}
}

func TestStaleSegmentsOfDeadLaunchersAreRemoved(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(ShmDir, fmt.Sprintf("%s%d-deadbeef", ShmPrefix, dead.Process.Pid))
	live := filepath.Join(ShmDir, fmt.Sprintf("%s%d-cafe", ShmPrefix, os.Getpid()))
	for _, p := range []string{stale, live} {
		if err := os.WriteFile(p, binary.LittleEndian.AppendUint64(nil, 1), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	defer os.Remove(live)
	removed := RemoveStaleSegments()
	if len(removed) != 1 || removed[0] != stale {
		t.Errorf("removed %v, want only %s", removed, stale)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("live launcher's segment removed: %v", err)
	}
}

// A launcher killed before it removed its bootstrap directory (or gotune
// stacks its scratch) leaves it to the next launch on the node: the
// directories of dead processes go, a live one's (this process's) and
// names of other shapes stay.
func TestStaleBootDirsOfDeadLaunchersAreRemoved(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(tmp, fmt.Sprintf("%s%d-123", bootDirPrefix, dead.Process.Pid))
	staleStacks := filepath.Join(tmp, fmt.Sprintf("gotune-stacks-%d-321", dead.Process.Pid))
	live := filepath.Join(tmp, fmt.Sprintf("%s%d-456", bootDirPrefix, os.Getpid()))
	other := filepath.Join(tmp, bootDirPrefix+"789") // an older gotune's name: no pid to judge by
	for _, d := range []string{stale, staleStacks, live, other} {
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// A file of a dead process (the reference benchmark's report, say)
	// goes too; a live one's stays.
	staleFile := filepath.Join(tmp, fmt.Sprintf("gotune-anchor-%d-555", dead.Process.Pid))
	liveFile, err := TempFile("anchor")
	if err != nil {
		t.Fatal(err)
	}
	liveFile.Close()
	if err := os.WriteFile(staleFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	removed := RemoveStaleBootDirs()
	if len(removed) != 3 || !slices.Contains(removed, stale) || !slices.Contains(removed, staleStacks) || !slices.Contains(removed, staleFile) {
		t.Errorf("removed %v, want only %s, %s and %s", removed, stale, staleStacks, staleFile)
	}
	for _, d := range []string{live, other, liveFile.Name()} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
}

func jsonRaw(v any) (json.RawMessage, error) { return json.Marshal(v) }

// bootJob is a job of size ranks as Run sets it up, every rank already
// reaped: what a bootstrap connection meets.
func bootJob(size int, token string) *running {
	j := newRunning(Job{Kind: "boot", Size: size}, token, io.Discard)
	for _, ch := range j.exited {
		close(ch)
	}
	return j
}

// talk sends data on a bootstrap connection of j and returns once j has
// read it all and let the connection go.
func talk(j *running, data []byte) {
	near, far := net.Pipe()
	done := make(chan struct{})
	go func() {
		j.serve(near)
		close(done)
	}()
	go io.Copy(io.Discard, far) // what the launcher answers
	far.Write(data)
	far.Close()
	<-done
}

// A rank that reports twice fails the job: its second result must not
// count as another rank's.
func TestRankReportingTwiceFailsTheJob(t *testing.T) {
	j := bootJob(2, "tok")
	hello, _ := json.Marshal(message{Op: "hello", Token: "tok", Rank: 1})
	talk(j, append(hello, `{"op":"result","result":1}{"op":"result","result":2}`...))
	select {
	case <-j.doneCh:
		t.Fatal("the job is done with one rank's two results")
	default:
	}
	if err := <-j.failed; err == nil || !strings.Contains(err.Error(), "rank 1 reported twice") {
		t.Errorf("the job failed with %v, want rank 1 reported twice", err)
	}
}

// Whatever a connection to the bootstrap sends, before its hello or after
// (with the job's token), the launcher refuses it or fails the job with an
// error: it never panics or blocks past the connection's end.
func FuzzBootstrap(f *testing.F) {
	hello, _ := json.Marshal(message{Op: "hello", Token: "tok", Rank: 0})
	for _, seed := range []string{
		string(hello) + "\n",
		string(hello) + `{"op":"barrier"}{"op":"allgather","blob":"AAE="}{"op":"result","result":1}`,
		string(hello) + `{"op":"result","result":1}{"op":"result","result":2}`,
		string(hello) + `{"op":"error","error":"x","not_supported":true}`,
		string(hello) + `{"op":"allgather"}{"op":"nonsense"}`,
		`{"op":"hello","token":"tok","rank":5}`,
		`{"op":"hello","token":"tok","rank":-1}`,
		"GET / HTTP/1.0\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		talk(bootJob(1, "tok"), data)
	})
}
