package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/internal/testutil/cluster"
)

// nshosts runs the command in this process (the cluster it brings up is
// owned by the test, so it dies with it); it returns the exit code and the
// output.
func nshosts(ctx context.Context, args ...string) (int, string, string) {
	var out, errw strings.Builder
	code := cli(ctx, args, strings.NewReader(""), &out, &errw, false)
	return code, out.String(), errw.String()
}

// The commands a person runs, in order: up, run, mpirun and srun by the
// printed arguments and environment, list, down.
func TestCommands(t *testing.T) {
	testutil.SkipUnless(t, "netns", cluster.Available())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code, out, errs := nshosts(ctx, "up", "2")
	if code != 0 {
		t.Fatalf("up 2: exit %d: %s%s", code, out, errs)
	}
	var slot int
	if _, err := fmt.Sscanf(out, "cluster %d:", &slot); err != nil {
		t.Fatalf("up 2: %q: %v", out, err)
	}
	t.Cleanup(func() {
		c, err := cluster.Load(slot)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Down(); err != nil {
			t.Error(err)
		}
	})
	c, err := cluster.Load(slot)
	if err != nil {
		t.Fatal(err)
	}
	s := fmt.Sprint(slot)
	h1, h2 := c.Hosts[0].Name, c.Hosts[1].Name
	_, haveMPI := exec.LookPath("mpirun")
	haveSlurm := cluster.SlurmAvailable()

	for _, tc := range []struct {
		name string
		args []string
		need string // capability (GOTUNE_REQUIRE's name) ...
		skip error  // ... missing when not nil
		code int
		want []string // stdout's lines, sorted
	}{
		{"run by name", []string{"run", "-slot", s, h1, "hostname"}, "", nil, 0, []string{h1}},
		{"run by index", []string{"run", "-slot", s, "2", "sh", "-c", "hostname; exit 3"}, "", nil, 3, []string{h2}},
		{"run on root", []string{"run", "-slot", s, "root", "sh", "-c", "ip -4 -o addr show dev " + c.Bridge + " | awk '{print $4}'"},
			"", nil, 0, []string{c.Root + "/24"}},
		{"unknown host", []string{"run", "-slot", s, "nowhere", "true"}, "", nil, 1, nil},
		{"mpirun by its printed arguments", []string{"run", "-slot", s, "root", "sh", "-c",
			`mpirun $(nshosts mpirun-args) -np 2 --map-by node hostname`}, "openmpi", haveMPI, 0, []string{h1, h2}},
		{"srun by its printed environment", []string{"run", "-slot", s, "root", "sh", "-c",
			`eval "$(nshosts srun-env)" && srun -N2 -n2 hostname`}, "slurm", haveSlurm, 0, []string{h1, h2}},
		{"down leaves a live owner's cluster", []string{"down", "-slot", s}, "", nil, 0,
			[]string{fmt.Sprintf("cluster %d: left alone, process", slot)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.need != "" {
				testutil.SkipUnless(t, tc.need, tc.skip)
			}
			// "nshosts" inside the shell lines is this test's cli, through
			// a function the shell defines.
			args := slices.Clone(tc.args)
			if args[len(args)-2] == "-c" {
				args[len(args)-1] = shellFunc(t, s) + args[len(args)-1]
			}
			code, out, errs := nshosts(ctx, args...)
			if code != tc.code {
				t.Fatalf("nshosts %s: exit %d, want %d: %s%s", strings.Join(args, " "), code, tc.code, out, errs)
			}
			got := strings.Split(strings.TrimSpace(out), "\n")
			slices.Sort(got)
			for i, w := range tc.want {
				if i >= len(got) || !strings.HasPrefix(got[i], w) {
					t.Errorf("nshosts %s:\ngot  %q\nwant %q", strings.Join(tc.args, " "), got, tc.want)
					break
				}
			}
		})
	}
	code, out, _ = nshosts(ctx, "list")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("cluster %d: %s", slot, c.Subnet)) || !strings.Contains(out, h2) {
		t.Errorf("list: exit %d: %q", code, out)
	}
}

// shellFunc defines nshosts in sh as this test's own printing of the
// arguments and environment for slot s (the built command is not on PATH).
func shellFunc(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("nshosts() { case \"$1\" in ")
	for _, what := range []string{"mpirun-args", "srun-env"} {
		code, out, errs := nshosts(context.Background(), what, "-slot", s)
		if code != 0 {
			if what == "srun-env" && cluster.SlurmAvailable() != nil {
				continue
			}
			t.Fatalf("%s: exit %d: %s", what, code, errs)
		}
		fmt.Fprintf(&b, "%s) cat <<'EOF'\n%sEOF\n;; ", what, out)
	}
	b.WriteString("esac; }\n")
	return b.String()
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "usage: nshosts"},
		{[]string{"frob"}, 2, `unknown command "frob"`},
		{[]string{"up"}, 1, "up: want the number of hosts"},
		{[]string{"up", "two"}, 1, `up: hosts "two": want a number`},
		{[]string{"up", "-slurm=maybe", "2"}, 1, `-slurm="maybe": want auto, yes or no`},
		{[]string{"up", "-bogus", "2"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"run", "h1"}, 2, "want HOST CMD"},
		{[]string{"iperf3", "h1"}, 1, "want SERVER CLIENT"},
		{[]string{"mpirun-args", "-slot", "15"}, 1, "cluster 15:"},
	} {
		code, out, errs := nshosts(context.Background(), tc.args...)
		if code != tc.code || !strings.Contains(out+errs, tc.want) {
			t.Errorf("nshosts %q: exit %d, %q; want exit %d and %q", tc.args, code, out+errs, tc.code, tc.want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"--mca":                       "--mca",
		"/run/gotune-cluster/0/agent": "/run/gotune-cluster/0/agent",
		"10.213.0.0/24":               "10.213.0.0/24",
		"":                            "''",
		"a b":                         "'a b'",
		"it's":                        `'it'\''s'`,
		"$HOME":                       "'$HOME'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
