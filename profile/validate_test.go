package profile

import (
	"strings"
	"testing"
)

func TestValidateSample(t *testing.T) {
	if err := Validate(sample()); err != nil {
		t.Fatal(err)
	}
}

// cma may pull in one range and push in the next: the receiver routes by
// size, and nothing is exported ahead of it.
func TestValidateCMAInBothDirections(t *testing.T) {
	p := sample()
	d := p.Decisions["intranode"][HostHost]
	d.Ranges = []Range{{Min: 0, Transport: "sm", Protocol: "eager"}, {Min: 4097, Transport: "cma", Protocol: "rendezvous", Mode: "pull"},
		{Min: 256 << 10, Transport: "cma", Protocol: "rendezvous", Mode: "push"}, {Min: 1 << 20, Transport: "sm", Protocol: "pipeline"}}
	p.Decisions["intranode"][HostHost] = d
	if err := Validate(p); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	decision := func(f func(*Decision)) func(*Profile) {
		return func(p *Profile) {
			d := p.Decisions["intranode"][HostHost]
			d.Ranges = append([]Range(nil), d.Ranges...)
			f(&d)
			p.Decisions["intranode"][HostHost] = d
		}
	}
	cases := []struct {
		name   string
		mutate func(*Profile)
		want   []string // each a line of the error
	}{
		{"version", func(p *Profile) { p.Version = 0 }, []string{"version: 0, this gotune reads format version 1"}},
		{"created", func(p *Profile) { p.Created = "21/11/2026" }, []string{`created: "21/11/2026" is not an RFC 3339 time`}},
		{"hash", func(p *Profile) { p.Hash = "md5:abc" }, []string{`hash: "md5:abc" is not sha256:<64 lower-case hex digits>`}},
		{"no hosts", func(p *Profile) { p.Scope.Hosts = nil }, []string{`scope.hosts: empty: name the hosts ("*" for any)`}},
		{"bad host pattern", func(p *Profile) { p.Scope.Hosts = []string{"n[0-9", ""} },
			[]string{`scope.hosts[0]: pattern "n[0-9": syntax error in pattern`, "scope.hosts[1]: empty pattern"}},
		{"negative cores", func(p *Profile) { p.Scope.Cores, p.Fingerprint.NUMANodes = -1, -2 },
			[]string{"scope.cores: negative (-1)", "fingerprint.numa_nodes: negative (-2)"}},
		{"library", func(p *Profile) { p.Libraries["Open MPI"] = "" },
			[]string{`libraries.Open MPI: invalid key "Open MPI"`, "libraries.Open MPI: empty version"}},
		{"absolute measurements", func(p *Profile) { p.Evidence.Measurements = "/data/m.jsonl" },
			[]string{`evidence.measurements: "/data/m.jsonl" is absolute`}},
		{"no decisions", func(p *Profile) { p.Decisions = nil }, []string{"decisions: none"}},
		{"gpu", func(p *Profile) {
			p.GPU = &GPU{GPUs: "0,1", IPCThreshold: -1, Staging: "legacy", PinnedThreshold: 256 << 10, Allocator: "cudaFree", Copy: "dma", Completion: "poll", Relay: -1, IPCCache: -4}
		}, []string{"gpu.ipc_threshold: negative (-1)", `gpu.staging: "legacy" is not one of async|sync`, `gpu.allocator: "cudaFree" is not one of plain|worker|pool`,
			`gpu.copy: "dma" is not one of ce|sm`, `gpu.completion: "poll" is not one of event|flag|sync`, "gpu.relay: negative (-1)", "gpu.ipc_cache: negative (-4)"}},
		{"relay with sync", func(p *Profile) {
			p.GPU = &GPU{GPUs: "0,1", Staging: "async", Allocator: "pool", Completion: "sync", Relay: 4096}
		}, []string{"gpu.relay: 4096 with completion sync, which never waits for the relay's word (the transport refuses it)"}},
		{"no pairs", func(p *Profile) { p.Decisions["internode"] = map[string]Decision{} }, []string{"decisions.internode: no memory pairs"}},
		{"internode", func(p *Profile) {
			p.Decisions["internode"] = map[string]Decision{HostHost: {
				Ranges: []Range{{Min: 0, Transport: "tcp", Protocol: "eager"}, {Min: 4096, Transport: "ib", Protocol: "eager"},
					{Min: 100000, Transport: "sm", Protocol: "rendezvous"}},
				EagerLimit: 65536, FIFODepth: 64, Options: map[string]string{"eager": "16K", "Depth": "8"},
			}}
		}, []string{"decisions.internode.host_host.fifo_depth: 64: shared-memory channels do not connect nodes (omit it)",
			"decisions.internode.host_host.ranges[1].transport: ib after tcp: one inter-node transport carries every size (messages of a pair stay in order on one)",
			`decisions.internode.host_host.ranges[2].transport: "sm" is not one of tcp|ib`,
			`decisions.internode.host_host.options.Depth: invalid key "Depth": keys are lower-case letters, digits, '_' and '-'`,
			"decisions.internode.host_host.options.eager: 16K, but eager_limit is 65536"}},
		{"internode protocol", func(p *Profile) {
			p.Decisions["internode"] = map[string]Decision{HostHost: {
				Ranges:     []Range{{Min: 0, Transport: "ib", Protocol: "eager"}, {Min: 8193, Transport: "ib", Protocol: "eager"}},
				EagerLimit: 8192,
			}}
		}, []string{"decisions.internode.host_host.ranges[1].protocol: eager from 8193 with eager_limit 8192: want rendezvous"}},
		{"bad pair key", func(p *Profile) { p.Decisions["intranode"]["host.host"] = p.Decisions["intranode"][HostHost] },
			[]string{`decisions.intranode.host.host: invalid key "host.host"`}},
		{"no ranges", decision(func(d *Decision) { d.Ranges = nil }), []string{"decisions.intranode.host_host.ranges: empty: no size can be routed"}},
		{"sizes", decision(func(d *Decision) { d.FragSize, d.FIFODepth, d.CellSize = 0, -1, 0 }),
			[]string{"decisions.intranode.host_host.frag_size: 0, must be at least 1",
				"decisions.intranode.host_host.fifo_depth: -1, must be at least 1",
				"decisions.intranode.host_host.cell_size: 0, must be at least 1"}},
		{"depth ranks", decision(func(d *Decision) { d.FIFODepthRanks = 1 }),
			[]string{"decisions.intranode.host_host.fifo_depth_ranks: 1, must be at least 2 (or omitted)"}},
		{"enumerations", decision(func(d *Decision) { d.Copy, d.Progress = "memcpy", "async" }),
			[]string{`decisions.intranode.host_host.copy: "memcpy" is not one of auto|go|movsb`,
				`decisions.intranode.host_host.progress: "async" is not one of poll|thread`}},
		{"park not a duration", decision(func(d *Decision) { d.Park = "50" }),
			[]string{`decisions.intranode.host_host.park: "50", must be a duration of 0 or more such as 50us (or omitted)`}},
		{"negative park", decision(func(d *Decision) { d.Park = "-1ms" }),
			[]string{`decisions.intranode.host_host.park: "-1ms", must be a duration of 0 or more such as 50us (or omitted)`}},
		{"unknown protocol", decision(func(d *Decision) { d.Ranges[1].Protocol = "rdma" }),
			[]string{`decisions.intranode.host_host.ranges[1].protocol: "rdma" is not one of eager|pipeline|rendezvous`}},
		{"pipeline over cma", decision(func(d *Decision) { d.Ranges[1].Transport = "cma" }),
			[]string{"decisions.intranode.host_host.ranges[1]: pipeline needs the copy-in/copy-out transport (sm), not cma"}},
		{"last range eager", decision(func(d *Decision) { d.Ranges = d.Ranges[:1] }),
			[]string{"decisions.intranode.host_host.ranges[0]: eager for sizes 0–∞, beyond eager_limit 4096"}},
		{"eager limit below the eager range", decision(func(d *Decision) { d.EagerLimit = 4095 }),
			[]string{"decisions.intranode.host_host.ranges[0]: eager for sizes 0–4K, beyond eager_limit 4095"}},
		{"negative cache", func(p *Profile) { p.Allocator.CacheBytes = -1 }, []string{"allocator.cache_bytes: negative (-1)"}},
		{"verdict", func(p *Profile) { p.Safety = append(p.Safety, Verdict{Outcome: "passed"}) },
			[]string{"safety[2].probe: empty", "safety[2].config: empty"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := sample()
			c.mutate(p)
			err := Validate(p)
			if err == nil {
				t.Fatal("valid")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(c.want) {
				t.Errorf("%d problems, want %d:\n%v", len(lines), len(c.want), err)
			}
			for _, w := range c.want {
				found := false
				for _, l := range lines {
					found = found || strings.HasPrefix(l, w)
				}
				if !found {
					t.Errorf("error\n%v\nhas no line starting %q", err, w)
				}
			}
		})
	}
}

// Sizes within the eager limit go eager; a range that reaches above it need
// not (the transport sends its eager part eagerly on its own).
func TestValidateEagerBoundary(t *testing.T) {
	p := sample()
	d := p.Decisions["intranode"][HostHost]
	d.EagerLimit = 8192 // ranges[1] (4K+1–1M-1) now straddles the limit
	p.Decisions["intranode"][HostHost] = d
	if err := Validate(p); err != nil {
		t.Errorf("straddling range: %v", err)
	}
}

func TestSizeLabel(t *testing.T) {
	for n, want := range map[int]string{
		0: "0", 1: "1", 1000: "1000", 1024: "1K", 1025: "1K+1", 4097: "4K+1", 65535: "64K-1",
		1 << 20: "1M", 1<<20 - 1: "1M-1", 3 << 30: "3G", 5000: "5000",
	} {
		if got := sizeLabel(n); got != want {
			t.Errorf("sizeLabel(%d) = %s, want %s", n, got, want)
		}
	}
}

// A GPU section validates and survives a write and a load.
func TestGPUSection(t *testing.T) {
	p := sample()
	p.GPU = &GPU{GPUs: "0,1", IPCThreshold: 0, Staging: "async", PinnedThreshold: 256 << 10, Allocator: "pool", Copy: "ce", IPCCache: 16,
		Avoided: []string{"staging=sync,ipc>=1G at load full: stalled"}}
	if err := Validate(p); err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/p.yaml"
	if err := Write(path, p); err != nil {
		t.Fatal(err)
	}
	q, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if q.GPU == nil || q.GPU.Allocator != "pool" || len(q.GPU.Avoided) != 1 {
		t.Fatalf("loaded gpu section %+v", q.GPU)
	}
}
