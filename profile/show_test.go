package profile

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestShowGolden(t *testing.T) {
	p, err := LoadEnv(goldenProfile, []string{"GOTUNE_ALLOCATOR_PURGE=never"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Show(&buf, p); err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/show.golden", buf.Bytes())
}

// A range's copy mode shows beside its protocol.
func TestShowCopyMode(t *testing.T) {
	p := sample()
	d := p.Decisions["intranode"][HostHost]
	d.Ranges = append(slices.Clone(d.Ranges), Range{Min: 64 << 20, Transport: "cma", Protocol: "rendezvous", Mode: "split"})
	p.Decisions["intranode"][HostHost] = d
	var buf bytes.Buffer
	if err := Show(&buf, p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "rendezvous (split)") {
		t.Errorf("the split range's mode is not shown:\n%s", buf.String())
	}
}

func TestShowUnchecked(t *testing.T) {
	p := sample()
	p.Safety = nil
	var buf bytes.Buffer
	if err := Show(&buf, p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "safety     no verdicts: not checked for hazards\n") {
		t.Errorf("a profile without verdicts does not say so:\n%s", buf.String())
	}
}

func TestDiff(t *testing.T) {
	b := sample()
	d := b.Decisions["intranode"][HostHost]
	d.EagerLimit = 8192
	b.Decisions["intranode"][HostHost] = d
	b.Decisions["intranode"]["host_device"] = d
	b.Allocator.Purge = "never"
	delete(b.Libraries, "openmpi")
	b.Libraries["mpich"] = "4.2.0"
	var buf bytes.Buffer
	differ, err := Diff(&buf, sample(), b)
	if err != nil || !differ {
		t.Fatalf("Diff = %t, %v; want true", differ, err)
	}
	want := `libraries.mpich: (absent) → "4.2.0"
libraries.openmpi: "4.1.4" → (absent)
decisions.intranode.host_device.ranges: (absent) → [0–4K sm eager, 4K+1–1M-1 sm pipeline, 1M–∞ cma rendezvous]
decisions.intranode.host_device.eager_limit: (absent) → 8192
decisions.intranode.host_device.frag_size: (absent) → 65536
decisions.intranode.host_device.frag_slots: (absent) → 16
decisions.intranode.host_device.fifo_depth: (absent) → 64
decisions.intranode.host_device.cell_size: (absent) → 4160
decisions.intranode.host_device.copy: (absent) → "auto"
decisions.intranode.host_device.progress: (absent) → "poll"
decisions.intranode.host_device.footprint: (absent) → "1.3 MiB per ordered pair; 8 ranks: 70 MiB"
decisions.intranode.host_host.eager_limit: 4096 → 8192
allocator.purge: "delayed" → "never"
agreement: 34 of 67 decisions (50.7%)
`
	if buf.String() != want {
		t.Errorf("Diff wrote\n%s\nwant\n%s", buf.String(), want)
	}

	buf.Reset()
	differ, err = Diff(&buf, sample(), sample())
	if err != nil || differ {
		t.Errorf("Diff(same) = %t, %v", differ, err)
	}
	if got := buf.String(); got != "agreement: 35 of 35 decisions (100.0%)\n" {
		t.Errorf("Diff(same) wrote %q", got)
	}
}
