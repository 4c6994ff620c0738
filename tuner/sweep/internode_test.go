package sweep

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/launch/launchtest"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/auto"
	"github.com/gotune/gotune/tuner/store"
)

// A sweep whose ranks span two nodes decides the inter-node pair too, and
// the profile it emits routes such a pair: the nodes here are node agents
// of an in-process cluster (names for hosts, real rank processes).
func TestInternodeStagesDecideBetweenNodes(t *testing.T) {
	c := launchtest.Cluster(t, "node-b")
	p := tinyPlan()
	// The host stages at their least: the inter-node stages are the subject.
	p.Eager, p.Fragments, p.Depths, p.Transports = parseText[Size]("4K"), parseText[Fragment]("64Kx16"), []int{64}, []string{"sm"}
	p.AllocPurges, p.ConfirmSizes, p.Bisect, p.Probes, p.VerifySizes = nil, SizeList{}, false, nil, SizeList{}
	p.Internode = InternodePlan{Transports: []string{"tcp", "ib"}, Eager: parseText[Size]("16K", "64K"),
		Conns: []int{1, 2}, SocketBufs: parseText[Size]("0", "1M"), Sizes: mustSizes("8,64K,1M")}
	res, err := Run(context.Background(), Config{Plan: p, Out: t.TempDir(), Nodes: c.Nodes()})
	if err != nil {
		t.Fatal(err)
	}
	prof, err := profile.Load(res.ProfilePath)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(prof.Scope.Hosts, c.Nodes()) {
		t.Errorf("scope.hosts %v, want the run's nodes %v", prof.Scope.Hosts, c.Nodes())
	}
	d, ok := prof.Decisions[profile.Internode][profile.HostHost]
	if !ok {
		t.Fatalf("no inter-node decision; notes: %v", res.Notes)
	}
	// ib cannot start between these nodes (no RDMA device here): tcp is
	// the only transport that ran.
	if d.Ranges[0].Transport != "tcp" || d.Ranges[1].Protocol != "rendezvous" || d.Ranges[1].Min != d.EagerLimit+1 {
		t.Errorf("inter-node ranges %+v with eager limit %d", d.Ranges, d.EagerLimit)
	}
	if e := d.Options["eager"]; e != "16K" && e != "64K" {
		t.Errorf("options %v: eager %q is not a candidate", d.Options, e)
	}
	if n := d.Options["conns"]; n != "1" && n != "2" {
		t.Errorf("options %v: conns %q is not a candidate", d.Options, n)
	}
	var stages []string
	for _, tr := range storedTrials(t, res.Dir) {
		if strings.HasPrefix(tr.Stage, "internode") {
			if tr.Nodes != 2 {
				t.Errorf("trial %s %s ran on %d node(s)", tr.Stage, tr.Candidate, tr.Nodes)
			}
			if !slices.Contains(stages, tr.Stage) {
				stages = append(stages, tr.Stage)
			}
		}
	}
	if b := d.Options["sndbuf"]; (b != "0" && b != "1M") || d.Options["rcvbuf"] != b {
		t.Errorf("options %v: socket buffers not a candidate, or not set together", d.Options)
	}
	if want := []string{stageInterTransport, stageInterEager, stageInterProtocol, stageInterQueue}; !slices.Equal(stages, want) {
		t.Errorf("inter-node stages %v, want %v", stages, want)
	}
	summary, err := os.ReadFile(filepath.Join(res.Dir, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(summary), "## decisions (internode, host_host: "+strings.Join(c.Nodes(), " and ")) {
		t.Errorf("summary has no inter-node decisions:\n%s", summary)
	}

	// The profile routes a pair across the nodes (auto picks the
	// inter-node decision by the ranks' hosts), payloads checked.
	abs, _ := filepath.Abs(res.ProfilePath)
	for _, nodes := range []int{2, 1} {
		spec := bench.Spec{Transport: "auto", Options: transports.Options{auto.KeyProfile: abs, auto.KeyHash: prof.Hash},
			Pattern: bench.Bandwidth, Sizes: []int{8, d.EagerLimit, d.EagerLimit + 1, 1 << 20}, Reps: 1, Iters: 4, Warmup: 1,
			Window: 4, Validate: true, Nodes: nodes}
		if _, err := bench.Run(context.Background(), spec, 0, launch.Hooks{}); err != nil {
			t.Errorf("bench --profile on %d node(s): %v", nodes, err)
		}
	}
}

// storedRecords reads a run directory's store.
func storedRecords(t *testing.T, dir string) []store.Record {
	t.Helper()
	recs, err := store.Read(filepath.Join(dir, MeasurementsFile))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// storedTrials reads a run directory's trials.
func storedTrials(t *testing.T, dir string) []Trial {
	t.Helper()
	var out []Trial
	for _, r := range storedRecords(t, dir) {
		if r.Kind != "trial" {
			continue
		}
		var tr Trial
		if err := json.Unmarshal(r.Data, &tr); err != nil {
			t.Fatal(err)
		}
		out = append(out, tr)
	}
	return out
}
