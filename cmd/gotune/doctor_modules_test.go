package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/gpu"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

// Doctor's lines for the kernel-assisted single copies: why each is absent
// (the device missing, an ABI it cannot speak, a node it may not open), or,
// when the job worked, what module it found.
func TestDoctorKernelModules(t *testing.T) {
	missing := fmt.Errorf("probe knem: rank 0 of probe-transport: not supported: %w",
		sys.NotSupported("/dev/knem", "missing (the knem module is not loaded: modprobe knem)", nil))
	abi := fmt.Errorf("probe knem: rank 0 of probe-transport: not supported: %w",
		sys.NotSupported("knem", "ABI 0xc unsupported (gotune speaks ABI 0xd, knem 1.1.x)", nil))
	denied := fmt.Errorf("probe xpmem: rank 1 of probe-transport: not supported: %w",
		sys.NotSupported("/dev/xpmem", "permission denied: mode -rw-------, owner uid 0, group gid 0; this process is uid 1000", nil))
	drivers := []*transports.Driver{{Name: "sm"}, {Name: "knem"}, {Name: "xpmem"}}
	for _, c := range []struct {
		name  string
		probe map[string]error
		want  []string
	}{
		{"absent", map[string]error{"knem": missing, "xpmem": denied}, []string{
			"knem     not supported: /dev/knem: missing (the knem module is not loaded: modprobe knem)",
			"xpmem    not supported: /dev/xpmem: permission denied: mode -rw-------, owner uid 0, group gid 0; this process is uid 1000"}},
		{"abi", map[string]error{"knem": abi}, []string{
			"knem     not supported: knem: ABI 0xc unsupported (gotune speaks ABI 0xd, knem 1.1.x)",
			"xpmem    available: xpmem module version 0x26005 (/dev/xpmem)"}},
		{"present", nil, []string{
			"sm       available\n",
			"knem     available: knem module /dev/knem: ABI 0xd, features 0x0 (no DMA engine)",
			"xpmem    available: xpmem module version 0x26005 (/dev/xpmem)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := doctorEnv{
				host:    func() hostinfo.Provenance { return hostinfo.Provenance{Host: "node1"} },
				ptrace:  func() ([]byte, error) { return []byte("0\n"), nil },
				drivers: func() []*transports.Driver { return drivers },
				probe:   func(_ context.Context, name string) error { return c.probe[name] },
				module: func(name string) (string, error) {
					return map[string]string{"knem": "knem module /dev/knem: ABI 0xd, features 0x0 (no DMA engine)",
						"xpmem": "xpmem module version 0x26005 (/dev/xpmem)"}[name], nil
				},
				gpus: func() (gpu.Source, func() error, error) { return nil, nil, sys.NotSupported("NVML", "none here", nil) },
			}
			var b bytes.Buffer
			if failed := doctor(context.Background(), &b, env, 0); failed != 0 {
				t.Errorf("%d failed checks: absence is no failure", failed)
			}
			for _, w := range c.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("no line %q in\n%s", w, b.String())
				}
			}
		})
	}
}
