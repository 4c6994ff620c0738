// Command gotune measures how data moves between processes on HPC and GPU
// nodes and tunes transport selection from the measurements.
package main

import (
	"os"

	"github.com/gotune/gotune/internal/launch"
)

func main() {
	launch.MaybeRunRank() // a re-executed rank never returns from here
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}
