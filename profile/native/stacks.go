package native

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// specs are the files of the stacks a profile holds decisions for. The
// precedence each states is the stack's documented one; `gotune check
// --stack X FILE` shows what a stack really uses.
var specs = map[string]spec{
	"openmpi": {
		file: "openmpi-mca-params.conf", title: "Open MPI MCA parameters", display: "Open MPI",
		where: "$HOME/.openmpi/mca-params.conf (read by every Open MPI job of the user), the system file " +
			"$prefix/etc/openmpi-mca-params.conf (Debian: /etc/openmpi/openmpi-mca-params.conf), or any path " +
			"named by OMPI_MCA_mca_base_param_files, which replaces that default list: list the user's and the " +
			"system's files after it (comma-separated, the first listed winning), or settings the system file " +
			"holds are lost (Debian's pml = ^ucx: without it Open MPI 4.1 picks pml cm).",
		usage: []string{
			"mkdir -p ~/.openmpi && cp openmpi-mca-params.conf ~/.openmpi/mca-params.conf",
			"# or, for one job, ahead of the default list:",
			"f=$PWD/openmpi-mca-params.conf,$HOME/.openmpi/mca-params.conf",
			"OMPI_MCA_mca_base_param_files=$f,/etc/openmpi/openmpi-mca-params.conf mpirun -n 2 ./app",
		},
		overrides: "--mca NAME VALUE on mpirun's command line beats an OMPI_MCA_NAME environment variable, which " +
			"beats a parameter file; the user's file beats the system's. `ompi_info --all --parsable` shows the " +
			"value in effect and where it came from.",
		name: func(param string) string { return param },
		line: confLine(" = "),
	},
	"mpich": {
		file: "mpich.env", title: "MPICH control variables (CVARs)", display: "MPICH",
		where: "the environment of mpiexec, which passes it to the ranks: MPICH reads CVARs from MPIR_CVAR_* " +
			"environment variables and reads no config file. Export every line before launching:",
		usage: []string{"set -a; . ./mpich.env; set +a; mpiexec -n 2 ./app"},
		overrides: "an MPIR_CVAR_* variable set after sourcing this file, and mpiexec's -genv or -env for the " +
			"ranks, replace its value; an application may also set a CVAR at run time through MPI_T.",
		name: func(param string) string { return "MPIR_CVAR_" + strings.ToUpper(param) },
		line: envLine,
	},
	"ucx": {
		file: "ucx.conf", title: "UCX configuration", display: "UCX",
		where: "every file named ucx.conf that UCX finds when a process first reads its configuration (1.13: src/ucs/config/parser.c), " +
			"each later one replacing the values of the earlier: $sysconfdir/ucx/ucx.conf (Debian: " +
			"/etc/ucx/ucx.conf), <library dir>/../etc/ucx.conf (from 1.17: ../etc/ucx/ucx.conf), $HOME/ucx.conf, $UCX_CONFIG_DIR/ucx.conf, and " +
			"./ucx.conf. UCX has no variable naming the file itself, only its directory (UCX_CONFIG_DIR):",
		usage:     []string{"UCX_CONFIG_DIR=$PWD mpirun -n 2 --mca pml ucx ./app"},
		overrides: "a UCX_* environment variable beats every file; `ucx_info -c` prints the values in effect.",
		notes: []string{"Lines are NAME=value, one a line, under 199 bytes (UCX 1.13 reads 200-byte lines). " +
			"UCX 1.17 and later can scope a [section] to a CPU with a first line CPU model = GLOB, in UCX's own " +
			"model names (`ucx_info -s`); UCX 1.13 to 1.16 read [section] lines but apply every section " +
			"everywhere, so this file has none."},
		name: func(param string) string { return "UCX_" + strings.ToUpper(param) },
		line: ucxLine,
	},
	"mimalloc": {
		file: "mimalloc.env", title: "mimalloc options", display: "mimalloc",
		where: "the environment of the ranks, with mimalloc (Debian's libmimalloc2.0) preloaded into them; " +
			"ranks started on other nodes need the variables forwarded (Open MPI: mpirun -x NAME):",
		usage: []string{"set -a; . ./mimalloc.env; set +a; LD_PRELOAD=libmimalloc.so.2 mpirun -n 2 ./app"},
		overrides: "a MIMALLOC_* variable set after sourcing this file replaces its value, and a program's own " +
			"mi_option_set calls replace both; MIMALLOC_VERBOSE=1 prints the options in effect.",
		name: func(param string) string { return "MIMALLOC_" + strings.ToUpper(param) },
		line: envLine,
	},
	"nccl": {
		file: "nccl.conf", title: "NCCL environment settings", display: "NCCL",
		where: "the file $NCCL_CONF_FILE names (NCCL 2.23 and later; a path, ~ not expanded), or else " +
			"$HOME/.nccl.conf, and then /etc/nccl.conf. NCCL reads them once per process, at its first " +
			"setting, and exports each KEY=VALUE line into the environment unless the variable is set already:",
		usage: []string{
			"NCCL_CONF_FILE=$PWD/nccl.conf torchrun --nproc-per-node 2 train.py",
			"# or, for every job of the user:",
			"cp nccl.conf ~/.nccl.conf",
		},
		overrides: "an NCCL_* variable in the process's environment beats this file, which beats /etc/nccl.conf " +
			"(first setter wins). NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ENV logs each value NCCL took and from where.",
		notes: []string{"Lines are KEY=VALUE exactly: NCCL trims nothing (a blank before '=' becomes part of the " +
			"name), keeps a CR of a CRLF line in the value (2.28), and reads '#' as a comment only in the first " +
			"column. Most values are read once and cached for the life of the process: a change needs a new process."},
		name: func(param string) string { return "NCCL_" + strings.ToUpper(param) },
		line: ncclLine,
	},
}

// ncclLL128Default is NCCL's built-in NCCL_LL128_BUFFSIZE (2.28: 120-byte
// lines x 640 threads x 8 x 8).
const ncclLL128Default = 4915200

// ncclLine is KEY=VALUE as NCCL's config reader applies it, refused where
// CheckNCCLSetting refuses it.
func ncclLine(name, value string) (string, error) {
	if err := CheckNCCLSetting(name, value); err != nil {
		return "", err
	}
	return name + "=" + value, nil
}

// CheckNCCLSetting says whether NAME=VALUE is a setting NCCL applies as
// written, from nccl.conf or the environment alike: nothing trimmed, one
// line, within its buffers; and no value NCCL is known to hang or corrupt
// with (an LL128 buffer off its steps, nccl#1739).
func CheckNCCLSetting(name, value string) error {
	switch {
	case value == "" || strings.TrimSpace(value) != value:
		return fmt.Errorf("%q: empty or with leading or trailing blanks, which NCCL keeps in the value", value)
	case strings.ContainsAny(value, "\r\n"):
		return fmt.Errorf("%q holds a line break", value)
	case len(name)+1+len(value) > 1023:
		return fmt.Errorf("%s is %d bytes, longer than the 1023 NCCL reads of a value", name, len(name)+1+len(value))
	}
	if name == "NCCL_LL128_BUFFSIZE" {
		if n, err := strconv.ParseInt(value, 10, 64); err != nil || !ll128Step(n) {
			return fmt.Errorf("%s=%s: not NCCL's %d bytes times a power of two from 1/32 to 4, the steps it is safe at (other sizes hang or corrupt: NVIDIA/nccl#1739)",
				name, value, ncclLL128Default)
		}
	}
	return nil
}

// ll128Step says whether n is NCCL's LL128 buffer size times 2^k, -5 <= k <= 2.
func ll128Step(n int64) bool {
	for k := -5; k <= 2; k++ {
		step := int64(ncclLL128Default)
		if k < 0 {
			step >>= -k
		} else {
			step <<= k
		}
		if n == step {
			return true
		}
	}
	return false
}

// ucxInlineComment is where UCX 1.13's ini parser would cut a value: ';'
// after a blank starts an inline comment.
var ucxInlineComment = regexp.MustCompile(`\s;`)

// ucxLine is NAME=value as UCX 1.13's config file parser reads it back
// whole: no blanks to strip, no inline comment, within its line buffer.
func ucxLine(name, value string) (string, error) {
	line, err := confLine("=")(name, value)
	if err != nil {
		return "", err
	}
	if ucxInlineComment.MatchString(value) {
		return "", fmt.Errorf("%q holds \" ;\", where UCX's parser starts a comment", value)
	}
	if len(line) > 198 {
		return "", fmt.Errorf("%s is %d bytes, longer than the 198 that UCX 1.13's parser reads in one line", name, len(line))
	}
	return line, nil
}
