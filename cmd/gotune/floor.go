package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/output"
)

// floorFlag is gotune bench's --floor: after a latency run, the cost of
// one cache line between the ranks' two CPUs, and each size's ratio to it.
type floorFlag struct{ on bool }

func (f *floorFlag) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.on, "floor", false, "latency: also measure the cache-line floor, one line bouncing between the ranks' two CPUs, and print each size's latency as a multiple of it (formats "+strings.Join(output.FloorFormats, ", ")+")")
}

// check refuses --floor where it has no meaning, before anything runs.
func (f *floorFlag) check(spec bench.Spec, format string) error {
	switch {
	case !f.on:
		return nil
	case spec.Pattern != bench.Latency:
		return fmt.Errorf("--floor: the floor is a one-way latency: use it with --pattern latency")
	case !slices.Contains(output.FloorFormats, format):
		return fmt.Errorf("--floor: prints with --format %s", strings.Join(output.FloorFormats, ", "))
	case len(spec.CPUs) < 2 || spec.InterNode():
		return fmt.Errorf("--floor: needs the ranks pinned on this node (--cpus auto or a list)")
	}
	return nil
}

// write measures the floor on the CPUs the ranks ran on, after the run so
// that those CPUs are as warm as during it, and writes it after res.
func (f *floorFlag) write(w io.Writer, format string, res bench.Result) error {
	if !f.on {
		return nil
	}
	fl, err := bench.LineFloor(res.Spec.CPUs, bench.FloorRuns, bench.FloorTrips)
	if err != nil {
		return fmt.Errorf("--floor: %w", err)
	}
	return output.WriteFloor(w, format, res, fl)
}
