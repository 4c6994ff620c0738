package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/profile/native"
)

// Exit statuses of gotune profile diff, as diff(1)'s.
const (
	diffDiffer  = 1
	diffTrouble = 2
)

func newProfile() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Check, show, compare tuned profiles and render their stacks' config files",
		Long: `A profile is the YAML file the tuner emits and the runtime loads: which transport and
protocol carry each message size, with thresholds, allocator settings and the hazard
verdicts they passed, sealed with a hash of the content.

Environment variables GOTUNE_<KEY> (dots and dashes as underscores, upper case)
override scalar keys when a profile is loaded, e.g. GOTUNE_ALLOCATOR_PURGE=never or
GOTUNE_DECISIONS_INTRANODE_HOST_HOST_EAGER_LIMIT=8192; validate, show and render apply
them, diff compares the files as written.`,
	}
	cmd.AddCommand(newProfileValidate(), newProfileShow(), newProfileDiff(), newProfileRender(), newProfileFind())
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

func newProfileFind() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "find",
		Short: "Print the catalogue's profile for this host (its scope matches); exit 1 when none does",
		Long: `find looks through the catalogue of profiles of record (one folder per kind of
node, each with the profile.yaml a sweep emitted there and its evidence) for the
ones whose scope (hosts, CPU model, cores) matches this host, and prints the first
one's path, then the other matches and why each other entry does not match. With
none, it says how to make one. gotune bench --transport auto without --profile
uses the same entry.`,
		Example: `  gotune profile find
  gotune bench --transport auto --profile "$(gotune profile find)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			found, why, host, err := findProfile(dir)
			if err != nil {
				return err
			}
			errOut := cmd.ErrOrStderr()
			fmt.Fprintf(errOut, "this host: %s, %s, %d cores; catalogue %s\n", host.Name, host.CPUModel, host.Cores, dir)
			for _, w := range why {
				fmt.Fprintf(errOut, "  no match: %s\n", w)
			}
			if len(found) == 0 {
				return &exitStatus{code: 1, err: errNoCatalogueEntry(dir, host)}
			}
			for _, e := range found[1:] {
				fmt.Fprintf(errOut, "  also matches: %s (%s)\n", e.Path, e.Name)
			}
			fmt.Fprintln(cmd.OutOrStdout(), found[0].Path)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "catalogue", profile.CatalogueDir(), "catalogue folder (default $"+profile.CatalogueEnv+", else "+profile.DefaultCatalogue+")")
	return cmd
}

// findProfile looks up this host in the catalogue at dir.
func findProfile(dir string) (found []profile.Entry, why []string, host profile.Host, err error) {
	prov := hostinfo.Collect("/")
	host = profile.Host{Name: prov.Host, CPUModel: prov.CPUModel, Cores: prov.Cores}
	entries, err := profile.Catalogue(dir)
	if err != nil {
		return nil, nil, host, err
	}
	found, why = profile.Find(entries, host)
	return found, why, host, nil
}

// errNoCatalogueEntry says that no entry of the catalogue at dir fits
// host, and how to make one.
func errNoCatalogueEntry(dir string, host profile.Host) error {
	return fmt.Errorf("no profile in the catalogue %s matches this host (%s, %s, %d cores): tune it with make sweep (or gotune sweep), then check the run in as %s/KIND/ (profile.yaml, summary, meta.json, measurements.jsonl gzipped)",
		dir, host.Name, host.CPUModel, host.Cores, dir)
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

func newProfileRender() *cobra.Command {
	var (
		stacks []string
		out    string
	)
	cmd := &cobra.Command{
		Use:   "render --stack STACK PROFILE",
		Short: "Write the config files the MPI stacks read, from a profile's stacks section",
		Long: `Render the decisions a profile holds for MPI stacks and allocators as the files
those stacks read: openmpi-mca-params.conf, mpich.env, ucx.conf, mimalloc.env, and
mvapich2.conf, derived from the Open MPI and MPICH decisions where a parameter maps
soundly (unverified: MVAPICH2 is not in Debian). Each file says where it goes, what
overrides it, and the evidence behind every value (docs/stacks.md).

--stack is repeatable (or comma-separated); "all" is every stack the profile has, with
mvapich2 where it has openmpi or mpich. Files are written atomically into -o DIR
(default: native/ beside the profile), or to stdout with -o -.`,
		Example: `  gotune profile render --stack openmpi RUN/profile.yaml
  gotune profile render --stack all -o /tmp/native RUN/profile.yaml
  gotune profile render --stack ucx -o - profile.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := profile.Load(args[0])
			if err != nil {
				return err
			}
			which, err := renderStacks(stacks, p)
			if err != nil {
				return err
			}
			if out == "-" {
				for _, st := range which {
					b, err := native.Render(st, p)
					if err != nil {
						return err
					}
					if _, err := cmd.OutOrStdout().Write(b); err != nil {
						return err
					}
				}
				return nil
			}
			dir := out
			if dir == "" {
				dir = filepath.Join(filepath.Dir(args[0]), "native")
			}
			paths, err := native.Write(dir, which, p)
			if err != nil {
				return err
			}
			for i, st := range which {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", st, paths[i])
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&stacks, "stack", nil, "stack to render: "+strings.Join(native.Stacks, ", ")+", or all (repeatable)")
	cmd.Flags().StringVarP(&out, "out", "o", "", `directory to write into (default: native/ beside the profile); "-" for stdout`)
	if err := cmd.MarkFlagRequired("stack"); err != nil {
		panic(err)
	}
	return cmd
}

// renderStacks resolves --stack: "all" is every stack p has a file for;
// each stack once, in the order given.
func renderStacks(names []string, p *profile.Profile) ([]string, error) {
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		add := []string{n}
		if n == "all" {
			add = native.Available(p)
			if len(add) == 0 {
				return nil, fmt.Errorf("--stack all: profile %s has no stacks section", p.Path())
			}
		} else if _, err := native.FileName(n); err != nil {
			return nil, fmt.Errorf("--stack: %w", err)
		}
		for _, s := range add {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out, nil
}
