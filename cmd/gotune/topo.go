package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/internal/gpu"
	"github.com/gotune/gotune/internal/sys"
)

// openGPUs opens the GPU topology source and returns how to close it; tests
// replace it with a fake.
var openGPUs = func() (gpu.Source, func() error, error) {
	s, err := gpu.OpenNVML()
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}

func newTopo() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "topo",
		Short: "Show the GPUs, how each pair is connected and the CPUs near each (as nvidia-smi topo -m)",
		Long: `topo prints the GPU connection matrix as nvidia-smi topo -m does (NV# for NVLink,
else the PCIe/SMP path: PIX, PXB, PHB, NODE, SYS), each GPU's local CPUs and NUMA
node (from sysfs, else NVML), a line per GPU and the pair gotune measures GPU-to-GPU
transfers on. On a machine without NVIDIA GPUs or driver it says so and exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "table" && format != "json" {
				return fmt.Errorf("--format %q: want table or json", format)
			}
			w := cmd.OutOrStdout()
			src, closeSrc, err := openGPUs()
			if errors.Is(err, gpu.ErrNotSupported) {
				return noGPU(w, format, notSupportedReason(err))
			}
			if err != nil {
				return err
			}
			topo, err := gpu.Discover(src)
			if cerr := closeSrc(); err == nil && cerr != nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if len(topo.Devices) == 0 {
				return noGPU(w, format, "NVML sees no devices")
			}
			if format == "json" {
				return writeJSON(w, topo)
			}
			return topo.Format(w)
		},
	}
	cmd.Flags().StringVarP(&format, "format", "f", "table", "output: table|json")
	return cmd
}

// noGPU reports that there is no GPU to show: a fact, not a failure.
func noGPU(w io.Writer, format, reason string) error {
	if format == "json" {
		return writeJSON(w, struct {
			Devices []gpu.Device `json:"devices"`
			Pairs   []gpu.Pair   `json:"pairs"`
			NoGPU   string       `json:"no_gpu"`
		}{[]gpu.Device{}, []gpu.Pair{}, reason})
	}
	_, err := fmt.Fprintln(w, "no NVIDIA GPU:", reason)
	return err
}

// notSupportedReason is "what: why" without the "not supported" in between.
func notSupportedReason(err error) string {
	if ns := (*sys.NotSupportedError)(nil); errors.As(err, &ns) && ns.Reason != "" {
		return ns.What + ": " + ns.Reason
	}
	return err.Error()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
