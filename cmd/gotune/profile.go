package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/profile"
)

// Exit statuses of gotune profile diff, as diff(1)'s.
const (
	diffDiffer  = 1
	diffTrouble = 2
)

func newProfile() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Check, show and compare tuned profiles",
		Long: `A profile is the YAML file the tuner emits and the runtime loads: which transport and
protocol carry each message size, with thresholds, allocator settings and the hazard
verdicts they passed, sealed with a hash of the content.

Environment variables GOTUNE_<KEY> (dots and dashes as underscores, upper case)
override scalar keys when a profile is loaded, e.g. GOTUNE_ALLOCATOR_PURGE=never or
GOTUNE_DECISIONS_INTRANODE_HOST_HOST_EAGER_LIMIT=8192; validate and show apply them,
diff compares the files as written.`,
	}
	cmd.AddCommand(newProfileValidate(), newProfileShow(), newProfileDiff())
	return cmd
}

func newProfileValidate() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check profiles: strict keys and types, format version, hash, and what they decide",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := 0
			for _, path := range args {
				p, err := profile.Load(path)
				if err != nil {
					bad++
					fmt.Fprintln(cmd.ErrOrStderr(), err)
					continue
				}
				note := ""
				if len(p.Overrides) > 0 {
					note = "; with " + strings.Join(p.Overrides, " ")
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%s%s)\n", path, p.Hash, note)
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d profiles invalid", bad, len(args))
			}
			return nil
		},
	}
}

func newProfileShow() *cobra.Command {
	return &cobra.Command{
		Use:   "show FILE",
		Short: "Print a profile for people: scope, evidence, size ranges, parameters, allocator, verdicts",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := profile.Load(args[0])
			if err != nil {
				return err
			}
			return profile.Show(cmd.OutOrStdout(), p)
		},
	}
}

func newProfileDiff() *cobra.Command {
	return &cobra.Command{
		Use:   "diff A B",
		Short: "Print the keys two profiles differ in and how many decisions agree; exit 0 same, 1 different, 2 trouble",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(2)(cmd, args); err != nil {
				return &exitStatus{code: diffTrouble, err: err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var ps [2]*profile.Profile
			for i, path := range args {
				p, err := profile.LoadEnv(path, nil) // the files as written
				if err != nil {
					return &exitStatus{code: diffTrouble, err: err}
				}
				ps[i] = p
			}
			differ, err := profile.Diff(cmd.OutOrStdout(), ps[0], ps[1])
			switch {
			case err != nil:
				return &exitStatus{code: diffTrouble, err: err}
			case differ:
				return &exitStatus{code: diffDiffer, err: errors.New("profiles differ")}
			}
			return nil
		},
	}
}
