package sweep

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

// A kernel module's transport is weighed only where its device is present:
// an absent one is dropped with a note and a record, and stays dropped
// when the run is resumed (even if the device appeared meanwhile); a
// replay keeps what the run measured.
func TestAbsentTransportsAreNotWeighed(t *testing.T) {
	absent := map[string]bool{"knem": true}
	defer func(p func(string, transports.Options) error) { presence = p }(presence)
	presence = func(driver string, _ transports.Options) error {
		if absent[driver] {
			return sys.NotSupported("/dev/"+driver, "missing (the knem module is not loaded: modprobe knem)", nil)
		}
		return nil
	}
	plan := Quick()
	plan.Transports = []string{"sm", "cma", "knem", "xpmem"}
	r, err := Open(context.Background(), Config{Plan: plan, Out: t.TempDir(), Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	names := func(cs []candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.name)
		}
		return out
	}
	got, err := r.presentOnly(transportCands(plan, SMParams{Eager: 4096}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"sm", "cma", "xpmem"}; !slices.Equal(names(got), want) {
		t.Errorf("weighed %v, want %v", names(got), want)
	}
	if len(r.notes) != 1 || !strings.Contains(r.notes[0], "knem not weighed: /dev/knem: not supported: missing") {
		t.Errorf("notes %q", r.notes)
	}
	dir := r.dir
	r.Close()

	absent["knem"] = false // the module was loaded since: the run stays as it began
	r, err = Open(context.Background(), Config{Resume: dir, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err = r.presentOnly(transportCands(plan, SMParams{Eager: 4096}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"sm", "cma", "xpmem"}; !slices.Equal(names(got), want) {
		t.Errorf("resumed: weighed %v, want %v", names(got), want)
	}
	absent["xpmem"] = true
	r.replayOnly = true
	if got, err = r.presentOnly(transportCands(plan, SMParams{Eager: 4096})); err != nil || len(got) != 3 {
		t.Errorf("replay: %v, %v; want the 3 the run measured", names(got), err)
	}
}

// The transport stage's candidates for a kernel module's transport start
// single copy right above the eager limit, and its wins become rendezvous
// ranges naming it.
func TestKernelCopyCandidatesAndRanges(t *testing.T) {
	plan := Quick()
	plan.Transports = []string{"sm", "knem", "xpmem"}
	for _, c := range transportCands(plan, SMParams{Eager: 8192}) {
		if c.transport != "sm" && c.opts[c.transport+".threshold"] != "8193" {
			t.Errorf("%s: options %v, want %s.threshold=8193", c.name, c.opts, c.transport)
		}
	}
	v := []SizeVerdict{{Size: 64 << 10, Winner: "sm"}, {Size: 1 << 20, Winner: "knem"}, {Size: 4 << 20, Winner: "xpmem"}}
	got := rangesFrom(4096, v, map[string]string{"sm": "sm", "knem": "knem", "xpmem": "xpmem"})
	want := []Range{{0, "sm", "eager", ""}, {4097, "sm", "pipeline", ""}, {(65536 + (1 << 20) + 1) / 2, "knem", "rendezvous", "pull"},
		{((1 << 20) + (4 << 20) + 1) / 2, "xpmem", "rendezvous", "pull"}}
	if !slices.Equal(got, want) {
		t.Errorf("ranges %v, want %v", got, want)
	}
	plan.Transports = []string{"sm", "shmem"}
	if err := plan.Check(); err == nil || !strings.Contains(err.Error(), `"shmem": want one of cma, cma-push, cma-split, knem, sm, xpmem`) {
		t.Errorf("Check: %v", err)
	}
}
