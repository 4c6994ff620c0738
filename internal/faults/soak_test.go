package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/sys"
)

// soakTraffic is one kind of validated traffic of the soak.
type soakTraffic struct {
	transport, pattern, mem string
	ranks                   int    // 0: a pair
	opt                     string // one --opt KEY=VALUE, or ""
}

func (s soakTraffic) String() string {
	out := s.transport + " " + s.pattern
	if s.opt != "" {
		out = s.transport + " (" + s.opt + ") " + s.pattern
	}
	if s.ranks > 0 {
		out += fmt.Sprintf(" at %d ranks", s.ranks)
	}
	if s.mem != "" {
		out += " " + s.mem
	}
	return out
}

// soakRecord is one soak run (one gotune bench process), as the report
// keeps it. The resource figures are sums over the command's process tree
// (command and ranks), sampled every soakSample while all its ranks ran:
// "first" is the sample a third of the way in (start-up over), "last" the
// most each figure reached from then on.
type soakRecord struct {
	Lane      int     `json:"lane"`
	Run       int     `json:"run"`
	Traffic   string  `json:"traffic"`
	Sizes     string  `json:"sizes"`
	Seconds   float64 `json:"seconds"`
	Exit      int     `json:"exit"`
	Bytes     int64   `json:"bytes_validated"`
	Samples   int     `json:"samples"`
	RSSFirst  int64   `json:"rss_kb_first"`
	RSSLast   int64   `json:"rss_kb_last"`
	FDsFirst  int     `json:"fds_first"`
	FDsLast   int     `json:"fds_last"`
	MapsFirst int     `json:"maps_first"`
	MapsLast  int     `json:"maps_last"`
	// ShmemKB is the node's Shmem after the run less before the soak:
	// every segment of the run must be gone.
	ShmemKB int64  `json:"shmem_kb_after"`
	Problem string `json:"problem,omitempty"`
}

const soakSample = 200 * time.Millisecond

// What a run may grow by between its first and last steady sample
// before it counts as a leak: descriptors none, mappings a few (the Go
// runtime maps heap arenas as it goes), resident memory a quarter plus
// 16 MiB (the heap's own breathing).
const (
	soakMapsSlack = 32
	soakRSSSlack  = 16 << 10 // kB
)

// TestSoak sends validated traffic through every transport present (and,
// with a GPU, every memory kind) for GOTUNE_SOAK_TIME (default 20s, the
// short form in make test), mixed patterns and sizes, one gotune bench
// process after another, and fails on a wrong byte, a run that fails, a
// rank whose descriptors, mappings or memory grow while it runs, or a
// segment, process or file a run leaves. GOTUNE_SOAK_LANES runs that many
// such sequences at once, each on its own cores (a large node carries
// more traffic than one pair can). GOTUNE_SOAK_REPORT gets a JSON line per
// run; GOTUNE_SOAK_SEED repeats its draws.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real gotune commands")
	}
	// The short form keeps to messages up to 64 KiB: a run of 4 MiB
	// latency lasts two minutes on a 2-core machine.
	length, largest, long := 20*time.Second, "64K", false
	if v := os.Getenv("GOTUNE_SOAK_TIME"); v != "" {
		largest, long = "", true
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("GOTUNE_SOAK_TIME=%q: want a duration such as 10m", v)
		}
		length = d
	}
	lanes, err := soakLanes(os.Getenv("GOTUNE_SOAK_LANES"))
	if err != nil {
		t.Fatal(err)
	}
	c := newCampaign(t)
	report := reporter(t, "GOTUNE_SOAK_REPORT")
	seed, err := envInt("GOTUNE_SOAK_SEED", int(time.Now().UnixNano()%1e9))
	if err != nil {
		t.Fatal(err)
	}
	traffic := c.soakTraffic()
	rand.New(rand.NewPCG(uint64(seed), 0)).Shuffle(len(traffic), func(i, j int) { traffic[i], traffic[j] = traffic[j], traffic[i] }) // a short soak meets other kinds first each time
	t.Logf("soak: %v of %d kinds of traffic, %d lane(s), seed %d (GOTUNE_SOAK_SEED): %v", length, len(traffic), len(lanes), seed, traffic)
	baseShmem := shmemKB()
	tally := &soakTally{t: t, report: report, bytesBy: map[string]int64{}}
	var wg sync.WaitGroup
	end := time.Now().Add(length)
	for l, cpus := range lanes {
		lc := c
		if len(lanes) > 1 {
			lc = c.forLane(l, cpus)
			t.Logf("soak: lane %d on cpus %s", l, lc.cpus)
		}
		// Lane l draws from its own stream and starts its own way into
		// the kinds; lane 0 draws as a soak of one lane does.
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(l)))
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				tr := traffic[(i+l*len(traffic)/len(lanes))%len(traffic)]
				rec := lc.soakRun(rng, tr, i, largest)
				rec.Lane = l
				rec.ShmemKB = shmemKB() - baseShmem
				lc.checkLeft(&rec, long && len(lanes) == 1)
				tally.add(tr, rec)
			}
		})
	}
	wg.Wait()
	if kb := shmemKB() - baseShmem; kb > 4<<10 && long {
		tally.problems = append(tally.problems, fmt.Sprintf("after the soak the node's Shmem is %d kB above its start", kb))
	}
	tally.end()
}

// checkLeft adds to rec's problems what its run left: processes, files
// and, when shmem holds the run to it, the node's Shmem. The node's Shmem
// is the node's: under make test, packages run beside the soak's short
// form, and other lanes' runs hold segments, so only the long form of one
// lane (make soak, alone on the node) holds a run to it; lanes are held to
// it once all have ended.
func (c *campaign) checkLeft(rec *soakRecord, shmem bool) {
	if left := c.leftProcesses(); len(left) > 0 {
		rec.Problem = join(rec.Problem, "processes left: "+strings.Join(left, ", "))
	}
	if files := c.files(); len(files) > 0 {
		rec.Problem = join(rec.Problem, "files left: "+strings.Join(files, ", "))
	}
	if rec.ShmemKB > 4<<10 && shmem {
		rec.Problem = join(rec.Problem, fmt.Sprintf("the node's Shmem %d kB above the soak's start", rec.ShmemKB))
	}
}

// soakTally adds up a soak's runs, lanes at once: bytes by kind, the
// problems, a log line and a report line per run.
type soakTally struct {
	t        *testing.T
	report   func(any)
	mu       sync.Mutex
	bytesBy  map[string]int64
	total    int64
	runs     int
	problems []string
}

func (s *soakTally) add(tr soakTraffic, rec soakRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	s.total += rec.Bytes
	s.bytesBy[tr.String()] += rec.Bytes
	if rec.Problem != "" {
		s.problems = append(s.problems, fmt.Sprintf("lane %d run %d (%s, sizes %s): %s", rec.Lane, rec.Run, rec.Traffic, rec.Sizes, rec.Problem))
	}
	s.t.Logf("lane %d run %4d %-28s %-14s %5.1fs %8.2f GB  rss %d->%d kB  fds %d->%d  maps %d->%d  shmem %+d kB%s",
		rec.Lane, rec.Run, rec.Traffic, rec.Sizes, rec.Seconds, float64(rec.Bytes)/1e9, rec.RSSFirst, rec.RSSLast,
		rec.FDsFirst, rec.FDsLast, rec.MapsFirst, rec.MapsLast, rec.ShmemKB, strings.TrimSuffix(" "+rec.Problem, " "))
	s.report(rec)
}

// end logs the bytes by kind and in all, and fails the test on each
// problem.
func (s *soakTally) end() {
	for _, k := range slices.Sorted(maps.Keys(s.bytesBy)) {
		s.t.Logf("validated %-28s %8.2f GB", k, float64(s.bytesBy[k])/1e9)
	}
	s.t.Logf("validated in all: %.2f GB in %d runs, 0 wrong bytes unless listed below", float64(s.total)/1e9, s.runs)
	for _, p := range s.problems {
		s.t.Error(p)
	}
}

// soakLanes parses GOTUNE_SOAK_LANES ("" is one lane) into the CPUs of
// each lane: one lane is not pinned (gotune places its ranks itself);
// several share out this process's CPUs.
func soakLanes(v string) ([][]int, error) {
	if v == "" || v == "1" {
		return [][]int{nil}, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("GOTUNE_SOAK_LANES=%q: want a number of lanes such as 3", v)
	}
	cpus, err := sys.AllowedCPUs()
	if err != nil {
		return nil, fmt.Errorf("GOTUNE_SOAK_LANES=%d: read this process's CPUs: %w", n, err)
	}
	lanes, err := splitLanes(cpus, n)
	if err != nil {
		return nil, fmt.Errorf("GOTUNE_SOAK_LANES=%d: %w", n, err)
	}
	return lanes, nil
}

// splitLanes gives each of n lanes an equal run of cpus, in order (four
// a lane hold the multi-rank patterns' ranks a core each).
func splitLanes(cpus []int, n int) ([][]int, error) {
	if n > len(cpus) {
		return nil, fmt.Errorf("%d CPUs here hold at most %d lanes", len(cpus), len(cpus))
	}
	each := len(cpus) / n
	lanes := make([][]int, n)
	for l := range lanes {
		lanes[l] = cpus[l*each : (l+1)*each]
	}
	return lanes, nil
}

// soakTraffic lists the traffic of the transports that run here: pairs
// over each (bw, bibw, latency), the multi-rank patterns at 4 ranks over
// the node-local ones, and with a GPU sm from its host-visible kinds,
// cudaipc between device buffers and from and to the others, and, where
// NCCL runs, its pairs and two collectives.
func (c *campaign) soakTraffic() []soakTraffic {
	var out []soakTraffic
	for _, tr := range []string{"sm", "cma", "xpmem", "knem", "tcp"} {
		if !c.runs("-t", tr) {
			c.t.Logf("soak: %s does not run here", tr)
			continue
		}
		for _, p := range []string{"bw", "bibw", "latency"} {
			out = append(out, soakTraffic{transport: tr, pattern: p})
		}
		if tr == "cma" { // split mode: both ranks copy each message
			for _, p := range []string{"bw", "bibw"} {
				out = append(out, soakTraffic{transport: tr, pattern: p, opt: "cma.mode=split"})
			}
		}
		if tr != "tcp" {
			for _, p := range []string{"mbw_mr", "alltoall", "incast"} {
				out = append(out, soakTraffic{transport: tr, pattern: p, ranks: 4})
			}
		}
	}
	// A GPU is there when sm runs from pinned memory (sm moves host-visible
	// kinds only; device memory goes through cudaipc).
	if c.runs("-t", "sm", "--mem", "pinned") {
		for _, mem := range []string{"pinned", "managed", "managed-device"} {
			out = append(out, soakTraffic{transport: "sm", pattern: "bw", mem: mem})
		}
		if c.runs("-t", "cudaipc", "--mem", "device") {
			out = append(out, soakTraffic{transport: "cudaipc", pattern: "bw", mem: "device"},
				soakTraffic{transport: "cudaipc", pattern: "bibw", mem: "device"},
				soakTraffic{transport: "cudaipc", pattern: "bw", mem: "pinned,device"},
				soakTraffic{transport: "cudaipc", pattern: "bw", mem: "device,managed"})
		}
		if c.runs("-t", "nccl", "--mem", "device") {
			out = append(out, soakTraffic{transport: "nccl", pattern: "bw", mem: "device"},
				soakTraffic{transport: "nccl", pattern: "bibw", mem: "device"},
				soakTraffic{transport: "nccl", pattern: "all_reduce", mem: "device", ranks: 2},
				soakTraffic{transport: "nccl", pattern: "all_gather", mem: "device", ranks: 2})
		}
	}
	if len(out) == 0 {
		c.t.Fatal("soak: no transport runs here")
	}
	return out
}

// runs says whether a validated 64-byte bandwidth run with args succeeds.
func (c *campaign) runs(args ...string) bool {
	args = append([]string{"bench", "-p", "bw", "-s", "64", "--reps", "1", "--iters", "2", "--warmup", "1", "--settle", "0", "--validate", "-q"}, args...)
	return c.command(context.Background(), nil, args...) == 0
}

// soakRun runs one gotune bench of traffic tr over three sizes drawn at
// random (none above largest, unless ""), sampling its process tree while
// it runs.
func (c *campaign) soakRun(rng *rand.Rand, tr soakTraffic, run int, largest string) soakRecord {
	ladder, reps := []string{"1", "8", "64", "512", "4K", "32K", "64K", "256K", "1M", "4M"}, "8"
	if tr.ranks > 0 {
		ladder, reps = []string{"8", "1K", "4K", "64K"}, "3"
	}
	if i := slices.Index(ladder, largest); i >= 0 {
		ladder = ladder[:i+1]
	}
	var sizes []string
	for _, k := range rng.Perm(len(ladder))[:3] {
		sizes = append(sizes, ladder[k])
	}
	slices.SortFunc(sizes, func(a, b string) int { return slices.Index(ladder, a) - slices.Index(ladder, b) })
	rec := soakRecord{Run: run, Traffic: tr.String(), Sizes: strings.Join(sizes, ",")}
	out := filepath.Join(c.t.TempDir(), "soak.jsonl")
	args := []string{"bench", "-t", tr.transport, "-p", tr.pattern, "-s", rec.Sizes, "--reps", reps, "--validate",
		"-f", "json", "-o", out, "--timeout", "5m", "-q"}
	if tr.ranks > 0 {
		args = append(args, "--ranks", strconv.Itoa(tr.ranks))
	}
	if tr.mem != "" {
		args = append(args, "--mem", tr.mem)
	}
	if tr.opt != "" {
		args = append(args, "--opt", tr.opt)
	}
	if c.cpus != "" {
		args = append(args, "--cpus", c.laneCPUs(max(tr.ranks, 2)))
	}
	var stderr bytes.Buffer
	began := time.Now()
	cmd := c.start(context.Background(), &stderr, args...)
	if cmd == nil {
		rec.Problem = "could not start gotune"
		return rec
	}
	samples := sampleTree(cmd.Process.Pid)
	rec.Exit = exitCode(cmd.Wait())
	rec.Seconds = time.Since(began).Seconds()
	steady := samples()
	rec.Samples = len(steady)
	if len(steady) > 0 {
		first, last := steady[len(steady)/3], treeSample{}
		for _, s := range steady[len(steady)/3:] { // the most each reached: ranks free their buffers as they end
			last.rssKB, last.fds, last.maps = max(last.rssKB, s.rssKB), max(last.fds, s.fds), max(last.maps, s.maps)
		}
		rec.RSSFirst, rec.RSSLast = first.rssKB, last.rssKB
		rec.FDsFirst, rec.FDsLast = first.fds, last.fds
		rec.MapsFirst, rec.MapsLast = first.maps, last.maps
		switch {
		case last.fds > first.fds:
			rec.Problem = join(rec.Problem, fmt.Sprintf("descriptors grew from %d to %d while the ranks ran", first.fds, last.fds))
		case last.maps > first.maps+soakMapsSlack:
			rec.Problem = join(rec.Problem, fmt.Sprintf("mappings grew from %d to %d while the ranks ran", first.maps, last.maps))
		case last.rssKB > first.rssKB*5/4+soakRSSSlack:
			rec.Problem = join(rec.Problem, fmt.Sprintf("resident memory grew from %d to %d kB while the ranks ran", first.rssKB, last.rssKB))
		}
	}
	if rec.Exit != 0 {
		rec.Problem = join(rec.Problem, fmt.Sprintf("exit %d: %s", rec.Exit, lastLine(stderr.String())))
		return rec
	}
	n, err := validatedBytes(out)
	if err != nil {
		rec.Problem = join(rec.Problem, err.Error())
	}
	rec.Bytes = n
	return rec
}

// treeSample is the sum over a process tree of its resident memory,
// open descriptors and mappings, and how many processes it had.
type treeSample struct {
	procs, fds, maps int
	rssKB            int64
}

// sampleTree samples pid's tree every soakSample until pid is gone; the
// function it returns waits for the sampling to end and returns the
// steady samples: those taken while the tree had its most processes.
func sampleTree(pid int) func() []treeSample {
	var (
		all  []treeSample
		done sync.WaitGroup
	)
	done.Go(func() {
		for tick := time.NewTicker(soakSample); ; <-tick.C {
			if s := state(pid); s == '?' || s == 'Z' {
				tick.Stop()
				return
			}
			s := treeSample{}
			for _, p := range append(descendants(pid), pid) {
				rss, fds, maps, ok := usage(p)
				if !ok || state(p) == 'Z' { // an exited rank has nothing left to count
					continue
				}
				s.procs++
				s.rssKB += rss
				s.fds += fds
				s.maps += maps
			}
			all = append(all, s)
		}
	})
	return func() []treeSample {
		done.Wait()
		most := 0
		for _, s := range all {
			most = max(most, s.procs)
		}
		var steady []treeSample
		for _, s := range all {
			if s.procs == most {
				steady = append(steady, s)
			}
		}
		return steady
	}
}

// usage reads pid's resident memory (kB), open descriptors and mappings.
func usage(pid int) (rssKB int64, fds, maps int, ok bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return 0, 0, 0, false
	}
	rssKB = kBField(status, "VmRSS:")
	entries, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return 0, 0, 0, false
	}
	m, err := os.ReadFile(filepath.Join(dir, "maps"))
	if err != nil {
		return 0, 0, 0, false
	}
	return rssKB, len(entries), bytes.Count(m, []byte{'\n'}), true
}

// validatedBytes counts the payload bytes a bench --format json file says
// were received and checked: every message of every repetition, warm-up
// included (each is validated), over every stream of the pattern. A point
// that is not validated is an error.
func validatedBytes(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var spec struct {
		Pattern string `json:"pattern"`
		Ranks   int    `json:"ranks"`
		Window  int    `json:"window"`
	}
	var total int64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var line struct {
			Type      string          `json:"type"`
			Spec      json.RawMessage `json:"spec"`
			Size      int64           `json:"size"`
			Iters     int64           `json:"iters"`
			Warmup    int64           `json:"warmup"`
			Samples   []float64       `json:"samples"`
			Validated bool            `json:"validated"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return total, fmt.Errorf("%s: %w", path, err)
		}
		switch line.Type {
		case "run":
			if err := json.Unmarshal(line.Spec, &spec); err != nil {
				return total, fmt.Errorf("%s: spec: %w", path, err)
			}
		case "point":
			if !line.Validated {
				return total, fmt.Errorf("%s: %s size %d not validated", path, spec.Pattern, line.Size)
			}
			msgs := (line.Iters + line.Warmup) * int64(len(line.Samples))
			total += msgs * line.Size * streams(spec.Pattern, max(spec.Ranks, 2), int64(max(spec.Window, 1)))
		}
	}
	return total, sc.Err()
}

// streams is how many messages of one iteration a pattern's receivers
// check, all ranks together.
func streams(pattern string, ranks int, window int64) int64 {
	n := int64(ranks)
	switch pattern {
	case "bw", "msgrate":
		return window
	case "bibw":
		return 2 * window
	case "latency":
		return 2
	case "mbw_mr":
		return n / 2 * window
	case "multi_lat":
		return n
	case "incast":
		return (n - 1) * window
	case "alltoall":
		return n * (n - 1)
	case "all_reduce", "all_gather", "broadcast": // every rank checks a whole buffer
		return n
	case "reduce_scatter": // every rank checks its 1/n of it
		return 1
	}
	return 0
}

// shmemKB is the node's Shmem (kB) from /proc/meminfo.
func shmemKB() int64 {
	b, _ := os.ReadFile("/proc/meminfo")
	return kBField(b, "Shmem:")
}

// kBField is the value of the "key   N kB" line of a /proc file, or 0.
func kBField(text []byte, key string) int64 {
	for line := range strings.Lines(string(text)) {
		if v, ok := strings.CutPrefix(line, key); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// The soak counts what the receivers checked, stream by stream.
func TestValidatedBytesCountsEveryStream(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		spec  string
		point string
		want  int64
	}{
		{`{"pattern":"bw","window":64}`, `"size":4096,"iters":100,"warmup":10,"samples":[1,2]`, 2 * 110 * 64 * 4096},
		{`{"pattern":"latency","window":64}`, `"size":8,"iters":100,"warmup":10,"samples":[1]`, 110 * 2 * 8},
		{`{"pattern":"alltoall","ranks":4,"window":64}`, `"size":1024,"iters":10,"warmup":2,"samples":[1,2,3]`, 3 * 12 * 12 * 1024},
		{`{"pattern":"mbw_mr","ranks":4,"window":8}`, `"size":64,"iters":10,"warmup":0,"samples":[1]`, 10 * 2 * 8 * 64},
	} {
		path := filepath.Join(dir, "b.jsonl")
		body := fmt.Sprintf("{\"type\":\"run\",\"spec\":%s}\n{\"type\":\"point\",%s,\"validated\":true}\n", c.spec, c.point)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := validatedBytes(path); err != nil || got != c.want {
			t.Errorf("%s: %d bytes (%v), want %d", c.spec, got, err, c.want)
		}
	}
	path := filepath.Join(dir, "unchecked.jsonl")
	if err := os.WriteFile(path, []byte("{\"type\":\"run\",\"spec\":{\"pattern\":\"bw\"}}\n{\"type\":\"point\",\"size\":8}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := validatedBytes(path); err == nil || !strings.Contains(err.Error(), "not validated") {
		t.Errorf("a point without validation: %v", err)
	}
}

// Lanes share out the CPUs in equal runs, and never more lanes than CPUs.
func TestSplitLanes(t *testing.T) {
	for _, c := range []struct {
		cpus  []int
		lanes int
		want  string
	}{
		{[]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, 4, "[[0 1 2 3] [4 5 6 7] [8 9 10 11] [12 13 14 15]]"},
		{[]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, 3, "[[1 2 3 4 5] [6 7 8 9 10] [11 12 13 14 15]]"},
		{[]int{0, 1}, 2, "[[0] [1]]"},
		{[]int{0, 1}, 3, "error: 2 CPUs here hold at most 2 lanes"},
	} {
		got, err := splitLanes(c.cpus, c.lanes)
		out := fmt.Sprint(got)
		if err != nil {
			out = "error: " + err.Error()
		}
		if out != c.want {
			t.Errorf("%d lanes of %v: %s, want %s", c.lanes, c.cpus, out, c.want)
		}
	}
	if _, err := soakLanes("two"); err == nil || !strings.Contains(err.Error(), "GOTUNE_SOAK_LANES") {
		t.Errorf(`GOTUNE_SOAK_LANES="two": %v, want an error naming the key`, err)
	}
}

// A lane's campaign counts as its own only the processes of its binary
// that carry its mark, so what one lane leaves is told from what another
// lane runs; without a lane every process of the binary counts.
func TestLanesTellTheirProcessesApart(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1) here")
	}
	if sleep, err = filepath.EvalSymlinks(sleep); err != nil {
		t.Fatal(err)
	}
	whole := &campaign{t: t, bin: sleep, tmp: t.TempDir()}
	lanes := []*campaign{whole.forLane(0, []int{0}), whole.forLane(1, []int{0})}
	var pids []int
	for _, c := range lanes {
		var stderr bytes.Buffer
		cmd := c.start(t.Context(), &stderr, "30")
		if cmd == nil {
			t.Fatal("could not start sleep")
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		pids = append(pids, cmd.Process.Pid)
	}
	for l, c := range lanes {
		ours := c.ours()
		if !slices.Contains(ours, pids[l]) || slices.Contains(ours, pids[1-l]) {
			t.Errorf("lane %d counts %v as its own, want %d and not %d", l, ours, pids[l], pids[1-l])
		}
	}
	if ours := whole.ours(); !slices.Contains(ours, pids[0]) || !slices.Contains(ours, pids[1]) {
		t.Errorf("without a lane %v counts as the campaign's, want both %v", ours, pids)
	}
}
