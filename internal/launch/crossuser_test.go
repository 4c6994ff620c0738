package launch

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
)

// intrudeEnv makes the test binary play another user's process: it tries
// to reach the job described in the variable and prints what got through.
const intrudeEnv = "GOTUNE_TEST_INTRUDE"

// targets is what an intruder knows of a job: a rank's pid and memory,
// the bootstrap socket, the segment's name.
type targets struct {
	PID      int     `json:"pid"`
	Addr     uintptr `json:"addr"`
	Boot     string  `json:"boot"`
	Segments []string
}

// intrude tries every way into the job and returns, by way, the error
// that kept it out ("" where it got in).
func intrude(tg targets) map[string]string {
	out := map[string]string{}
	try := func(way string, err error) {
		out[way] = ""
		if err != nil {
			out[way] = err.Error()
		}
	}
	if tg.Boot != "" {
		network, addr := bootstrapAddr(tg.Boot)
		c, err := net.Dial(network, addr)
		if err == nil {
			c.Close()
		}
		try("join the bootstrap", err)
	}
	for i, seg := range tg.Segments {
		f, err := os.OpenFile(seg, os.O_RDWR, 0)
		if err == nil {
			f.Close()
		}
		try(fmt.Sprintf("open segment %d", i), err)
	}
	if tg.PID == 0 {
		return out
	}
	for _, p := range []string{"environ", "mem", fmt.Sprintf("fd/%d", heartbeatFD), fmt.Sprintf("fd/%d", segmentFD)} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/%s", tg.PID, p))
		if err == nil {
			_, err = f.Read(make([]byte, 1))
			f.Close()
			if err == io.EOF {
				err = nil // opened and readable, if empty
			}
		}
		try("read /proc/pid/"+p, err)
	}
	_, err := sys.CopyFromProcess(tg.PID, [][]byte{make([]byte, 8)}, []sys.RemoteSegment{{Addr: tg.Addr, Len: 8}})
	try("copy from the rank (CMA)", err)
	return out
}

// runIntruder starts a process of the other user (this test binary)
// against tg and returns its report.
func runIntruder(tg targets) (map[string]string, error) {
	exe, remove, err := testutil.SharedExecutable()
	if err != nil {
		return nil, err
	}
	defer remove()
	b, _ := json.Marshal(tg)
	cmd := exec.Command(exe)
	cmd.Env = []string{intrudeEnv + "=" + string(b)}
	testutil.AsNobody(cmd)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("the intruder: %w", err)
	}
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		return nil, fmt.Errorf("the intruder's report %q: %w", out, err)
	}
	return got, nil
}

// intruderRank is rank 0 of a job with a segment: it sets another user's
// process on itself while the job runs and returns that process's report.
func intruderRank(r *Rank) (any, error) {
	if r.ID != 0 {
		return nil, nil
	}
	return runIntruder(targets{PID: os.Getpid(), Addr: sys.AddressOf(r.Segment), Boot: os.Getenv(envBoot)})
}

// A process of another user reaches nothing of a running job: not its
// bootstrap socket, its shared segment (by name while it has one, or
// through the rank's fds), the rank's environment (the job token) or
// memory, nor the rank's memory by CMA.
func TestAnotherUserIsKeptOut(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a process of another user")
	}
	for _, backend := range []string{Memfd, Posix} {
		t.Run(backend, func(t *testing.T) {
			// A posix segment has a name only until every rank has mapped
			// it: the other user tries it then, as the ranks start.
			atStart := map[string]string{}
			var startErr error
			hooks := Hooks{Started: func([]int) {
				segs, _ := filepath.Glob(filepath.Join(ShmDir, fmt.Sprintf("%s%d-*", ShmPrefix, os.Getpid())))
				if len(segs) > 0 {
					atStart, startErr = runIntruder(targets{Segments: segs})
				}
			}}
			res, err := Run(t.Context(), Job{Kind: "intruder", Size: 2, SegmentBytes: 4096, Backend: backend}, hooks)
			if err != nil || startErr != nil {
				t.Fatal(err, startErr)
			}
			var got map[string]string
			if err := json.Unmarshal(res[0], &got); err != nil {
				t.Fatal(err)
			}
			maps.Copy(got, atStart)
			ways := []string{"join the bootstrap", "read /proc/pid/environ", "read /proc/pid/mem", "read /proc/pid/fd/3", "read /proc/pid/fd/4", "copy from the rank (CMA)"}
			if backend == Posix {
				ways = append(ways, "open segment 0")
			}
			for _, way := range ways {
				why, tried := got[way]
				switch {
				case !tried:
					t.Errorf("%s: not tried (report %v)", way, got)
				case why == "":
					t.Errorf("another user could %s", way)
				default:
					t.Logf("%s: refused: %s", way, why)
				}
			}
		})
	}
}
