package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/tuner/stackcheck"
)

// Exit statuses of gotune check.
const (
	checkOverridden = 1 // a value of the file is overridden, unknown or not taken
	checkTrouble    = 2 // the file or a tool failed
)

func newCheck() *cobra.Command {
	var stack string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check --stack openmpi|mpich|ucx|mimalloc|nccl [FILE]",
		Short: "Show the values a stack will really use, with a tuned file loaded as users load it",
		Long: `check asks the stack itself what it will use: ompi_info --all --parsable with FILE as
Open MPI's params file (OMPI_MCA_mca_base_param_files), MPICH's control variables through
MPI_T with FILE's lines in the environment, ucx_info -c with FILE as ./ucx.conf,
mimalloc's start-up lines with FILE's lines in the environment of a process that preloads it,
and NCCL's own log (NCCL_DEBUG=INFO) of gotune's NCCL benchmarks on two GPUs with FILE named
by NCCL_CONF_FILE.

For every value of FILE it prints the value the stack uses and where that comes from, and
warns where an environment variable or a file of higher precedence overrides it, where the
stack does not know the name (all five ignore an unknown name without a word) or keeps
another value. Without FILE it prints the values in use for the parameters gotune tunes.

Exit status: 0 every value of FILE is used, 1 one is overridden, unknown or not taken,
2 trouble (FILE does not parse, a tool is missing or fails).`,
		Example: `  gotune check --stack openmpi RUN/native/openmpi-mca-params.conf
  gotune check --stack ucx                   # UCX's values for what gotune tunes
  OMPI_MCA_btl_vader_eager_limit=4096 gotune check --stack openmpi tuned.conf`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.MaximumNArgs(1)(cmd, args); err != nil {
				return &exitStatus{code: checkTrouble, err: err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if stack == "" {
				return &exitStatus{code: checkTrouble, err: fmt.Errorf("--stack: want one of %s", strings.Join(stackcheck.Stacks(), ", "))}
			}
			file := ""
			if len(args) == 1 {
				file = args[0]
			}
			ctx, cancel := jobContext(timeout)
			defer cancel()
			r, err := stackcheck.Check(ctx, stack, file, os.Environ())
			if err != nil {
				return &exitStatus{code: checkTrouble, err: err}
			}
			if err := r.Write(cmd.OutOrStdout()); err != nil {
				return &exitStatus{code: checkTrouble, err: err}
			}
			if r.Problems() {
				return &exitStatus{code: checkOverridden, err: fmt.Errorf("%s: %d warning(s)", file, len(r.Warnings))}
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitStatus{code: checkTrouble, err: err} })
	cmd.Flags().StringVar(&stack, "stack", "", "the stack: "+strings.Join(stackcheck.Stacks(), "|"))
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "give up after this long")
	return cmd
}
