package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/importer"
	"github.com/gotune/gotune/bench/output"
)

// newImport reads other tools' output files into gotune's results. Every
// file is read before anything is written, so a bad file appends nothing
// to --out.
func newImport() *cobra.Command {
	var format, out string
	cmd := &cobra.Command{
		Use:   "import FILE...",
		Short: "Read other benchmarks' output (" + strings.Join(importer.Tools(), ", ") + ") as gotune results",
		Long: `Each file's tool is detected from its first lines. The results print to stdout in
--format; a line per file on stderr says what was read. With --out they are also
appended to FILE as JSON lines, the format of gotune bench --format json, so that
compare reads them beside gotune's own runs.`,
		Example: `  gotune import osu_latency.txt osu_bw.txt
  gotune import --format json --out runs.jsonl IMB-MPI1.log`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(output.Formats, format) {
				return fmt.Errorf("--format %q: want one of %s", format, strings.Join(output.Formats, ", "))
			}
			var all []bench.Result
			var errs []error
			for _, path := range args {
				tool, results, err := importer.File(path)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s, %d results\n", path, tool, len(results))
				all = append(all, results...)
			}
			switch len(errs) {
			case 0:
			case 1:
				return errs[0]
			default:
				for _, err := range errs {
					fmt.Fprintln(cmd.ErrOrStderr(), err)
				}
				return fmt.Errorf("import: %d of %d files could not be read", len(errs), len(args))
			}
			if err := output.Write(cmd.OutOrStdout(), format, all); err != nil {
				return fmt.Errorf("import: %w", err)
			}
			if out == "" {
				return nil
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			if err := output.Write(f, "json", all); err != nil {
				f.Close()
				return fmt.Errorf("--out %s: %w", out, err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&format, "format", "f", "table", "output: "+strings.Join(output.Formats, "|"))
	fl.StringVarP(&out, "out", "o", "", "also append the results to FILE as JSON lines (created if missing)")
	return cmd
}
