package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/profile/native/ncclplugin"
)

func newNCCL() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nccl",
		Short: "What gotune gives NCCL: its tuner plugin",
	}
	cmd.AddCommand(newNCCLPlugin())
	return cmd
}

func newNCCLPlugin() *cobra.Command {
	var dir, table string
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Build libnccl-tuner-gotune.so, the tuner plugin that applies a table of per-collective choices",
		Long: `Builds the tuner plugin with the node's C compiler ($CC, or cc) into DIR. NCCL loads it
when NCCL_TUNER_PLUGIN names its path, and it reads the table GOTUNE_NCCL_TABLE names:
one rule a line, "collective min_bytes max_bytes ranks algorithm protocol channels"
(ranks 0: any; algorithm and protocol "-": NCCL's; channels 0: NCCL's), the first
match deciding a call. Calls no rule matches, and rules whose choice NCCL marks
unavailable for a call, stay NCCL's. It exports the tuner ABIs v4, v5 and v6 (NCCL
2.24 to 2.30) and never returns an error to NCCL. With GOTUNE_NCCL_TUNER_STATS set,
each communicator appends a line of counts to that file when it is destroyed.`,
		Example: `  gotune nccl plugin -o ~/.gotune
  gotune nccl plugin -o . --table nccl-tuner.table`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			var tablePath string
			if table != "" {
				f, err := os.Open(table)
				if err != nil {
					return fmt.Errorf("--table: %w", err)
				}
				rules, err := ncclplugin.ReadTable(f, table)
				f.Close()
				if err != nil {
					return fmt.Errorf("--table: %w", err)
				}
				if tablePath, err = filepath.Abs(table); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "table %s: %d rules\n", table, len(rules))
			}
			so, err := ncclplugin.Build(cmd.Context(), abs)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "built %s\n", so)
			fmt.Fprintln(out, "load it through these lines in nccl.conf ($NCCL_CONF_FILE or ~/.nccl.conf), or the environment:")
			fmt.Fprintf(out, "NCCL_TUNER_PLUGIN=%s\n", so)
			if tablePath != "" {
				fmt.Fprintf(out, "%s=%s\n", ncclplugin.TableEnv, tablePath)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&dir, "out", "o", ".", "directory to build the plugin into")
	cmd.Flags().StringVar(&table, "table", "", "a table to check and name in the printed lines")
	return cmd
}
