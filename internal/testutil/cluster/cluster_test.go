package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// helperEnv makes the test binary a helper process (TestMain): run on a
// host by the tests, or killed by them to leave a cluster behind.
const helperEnv = "GOTUNE_CLUSTER_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := helper(mode, os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helper modes:
//   - listen ADDR: listen on ADDR:0, print the port, write this host's
//     hostname to the one connection accepted;
//   - dial ADDR:PORT: print what the listener wrote;
//   - up N: bring up N hosts (Slurm too when N > 1 and Slurm is here),
//     print the cluster's state and wait to be killed.
func helper(mode, arg string) error {
	switch mode {
	case "listen":
		ln, err := net.Listen("tcp4", net.JoinHostPort(arg, "0"))
		if err != nil {
			return err
		}
		fmt.Println(ln.Addr().(*net.TCPAddr).Port)
		conn, err := ln.Accept()
		if err != nil {
			return err
		}
		name, _ := os.Hostname()
		_, err = fmt.Fprintf(conn, "%s from %s\n", name, conn.RemoteAddr().(*net.TCPAddr).IP)
		conn.Close()
		return err
	case "dial":
		conn, err := net.DialTimeout("tcp4", arg, 10*time.Second)
		if err != nil {
			return err
		}
		_, err = io.Copy(os.Stdout, conn)
		return err
	case "up":
		n := 1
		fmt.Sscan(arg, &n)
		c, err := Up(context.Background(), Config{Hosts: n, Slot: -1})
		if err != nil {
			return err
		}
		if n > 1 && SlurmAvailable() == nil {
			if _, err := c.StartSlurm(context.Background()); err != nil {
				return err
			}
		}
		b, _ := json.Marshal(c)
		fmt.Printf("%s\n", b)
		select {} // until killed
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// helperCmd is the test binary as a helper process in mode, on host h.
func helperCmd(ctx context.Context, h Host, mode, arg string) *exec.Cmd {
	cmd := h.Command(ctx, os.Args[0], "-test.run=^$", arg)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	return cmd
}

// Each host has its name, its address on eth0 and lo up; the root keeps
// its own hostname; and every host reaches every other over TCP, seen from
// its own address.
func TestHosts(t *testing.T) {
	c := Hosts(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rootName, _ := os.Hostname()
	if out, err := exec.Command("hostname").Output(); err != nil || strings.TrimSpace(string(out)) != rootName {
		t.Errorf("root hostname: %q (%v), want %q", out, err, rootName)
	}
	for i, h := range c.Hosts {
		for _, check := range []struct {
			argv []string
			want string
		}{
			{[]string{"hostname"}, h.Name},
			{[]string{"ip", "-4", "-o", "addr", "show", "dev", "eth0"}, " " + h.Addr + "/24 "},
			{[]string{"ip", "-o", "link", "show", "dev", "lo"}, "UP"},
			{[]string{"ip", "route", "show", "default"}, "via " + c.Root},
		} {
			out, err := h.Command(ctx, check.argv[0], check.argv[1:]...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), check.want) {
				t.Errorf("host %d: %s: %q (%v), want %q in it", i+1, strings.Join(check.argv, " "), out, err, check.want)
			}
		}
	}
	for _, pair := range [][2]int{{0, 1}, {1, 2}, {2, 0}} {
		srv, cli := c.Hosts[pair[0]], c.Hosts[pair[1]]
		got := connect(t, ctx, srv, cli)
		if want := srv.Name + " from " + cli.Addr; got != want {
			t.Errorf("%s -> %s: %q, want %q", cli.Name, srv.Name, got, want)
		}
	}
	// The root reaches the hosts too (mpirun's and slurmctld's side).
	if got, want := connect(t, ctx, c.Hosts[0], c.RootHost()), c.Hosts[0].Name+" from "+c.Root; got != want {
		t.Errorf("root -> %s: %q, want %q", c.Hosts[0].Name, got, want)
	}
}

// connect listens on srv (at its address) and dials it from cli; it returns
// what the listener wrote.
func connect(t *testing.T, ctx context.Context, srv, cli Host) string {
	t.Helper()
	ln := helperCmd(ctx, srv, "listen", srv.Addr)
	stdout, err := ln.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	ln.Stderr = os.Stderr
	if err := ln.Start(); err != nil {
		t.Fatal(err)
	}
	defer ln.Wait()
	port, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("listener on %s: %v", srv.Name, err)
	}
	out, err := helperCmd(ctx, cli, "dial", net.JoinHostPort(srv.Addr, strings.TrimSpace(port))).Output()
	if err != nil {
		t.Fatalf("dial from %s: %v", cli.Name, err)
	}
	return strings.TrimSpace(string(out))
}

// gone lists what is left of slot's objects: namespaces, links, mounts,
// its directory.
func gone(t *testing.T, slot int) []string {
	t.Helper()
	var left []string
	ns, _ := exec.Command("ip", "netns", "list").Output()
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, s := range []struct{ text, mark string }{
		{string(ns), fmt.Sprintf("gotune%d-", slot)},
		{string(links), fmt.Sprintf(" gt%dh", slot)},
		{string(links), " " + bridgeName(slot)},
		{string(mounts), slotDir(slot) + "/"},
	} {
		if strings.Contains(s.text, s.mark) {
			left = append(left, s.mark)
		}
	}
	if _, err := os.Stat(slotDir(slot)); err == nil {
		left = append(left, slotDir(slot))
	}
	return left
}

func TestDownRemovesEverything(t *testing.T) {
	testutil.SkipUnless(t, "netns", Available())
	c, err := Up(context.Background(), Config{Hosts: 2, Slot: -1})
	if err != nil {
		t.Fatal(err)
	}
	if left := gone(t, c.Slot); len(left) != 5 {
		t.Errorf("up: want namespaces, links, bridge, mounts and directory; found %v", left)
	}
	if err := c.Down(); err != nil {
		t.Fatal(err)
	}
	if left := gone(t, c.Slot); len(left) > 0 {
		t.Errorf("after Down: left %v", left)
	}
	if err := c.Down(); err != nil {
		t.Errorf("second Down: %v", err)
	}
}

// Two clusters at once (as two test binaries would make) get different
// slots, names and subnets.
func TestClustersTakeDistinctSlots(t *testing.T) {
	a, b := Hosts(t, 1), Hosts(t, 1)
	if a.Slot == b.Slot || a.Subnet == b.Subnet || a.Hosts[0].Name == b.Hosts[0].Name {
		t.Errorf("two clusters share: slots %d %d, subnets %s %s, hosts %s %s", a.Slot, b.Slot, a.Subnet, b.Subnet, a.Hosts[0].Name, b.Hosts[0].Name)
	}
}

// A run killed mid-way (SIGKILL: no cleanup) leaves hosts behind, and its
// daemons die with it; its slot stays taken while it lives, and the next
// Up that wants the slot removes the leftovers and takes it.
func TestKilledRunIsCleanedUp(t *testing.T) {
	testutil.SkipUnless(t, "netns", Available())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := helperCmd(ctx, Host{}, "up", "2")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper up: %v", err)
	}
	var dead Cluster
	if err := json.Unmarshal([]byte(line), &dead); err != nil {
		t.Fatalf("helper up: %v: %q", err, line)
	}
	if _, err := Up(ctx, Config{Hosts: 1, Slot: dead.Slot}); err == nil || !strings.Contains(err.Error(), "no free slot") {
		t.Errorf("Up of a live owner's slot %d: %v, want no free slot", dead.Slot, err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if left := gone(t, dead.Slot); len(left) != 5 {
		t.Errorf("killed run: want its namespaces, links, bridge, mounts and directory left; found %v", left)
	}
	if SlurmAvailable() == nil && len(dead.Daemons) != 4 {
		t.Errorf("killed run's daemons: %v, want munged, slurmctld and 2 slurmd", dead.Daemons)
	}
	for _, d := range dead.Daemons {
		if !waitFor(10*time.Second, func() bool { return !alive(d.Proc) }) {
			t.Errorf("%s (pid %d) outlived its killed owner", d.Name, d.PID)
			_ = stop(d.Proc)
		}
	}
	c, err := Up(ctx, Config{Hosts: 1, Slot: dead.Slot})
	if err != nil {
		t.Fatalf("Up over a dead owner's slot: %v", err)
	}
	if len(c.Hosts) != 1 {
		t.Errorf("hosts: %v", c.Hosts)
	}
	if _, err := os.Stat(filepath.Join("/run/netns", nsName(dead.Slot, 2))); err == nil {
		t.Errorf("the dead run's second host is still there")
	}
	if err := c.Down(); err != nil {
		t.Fatal(err)
	}
	if left := gone(t, dead.Slot); len(left) > 0 {
		t.Errorf("after Down: left %v", left)
	}
}

// fake is a cluster's state without the cluster, for what needs none.
func fake() *Cluster {
	c := &Cluster{Slot: 3, Dir: slotDir(3), Bridge: bridgeName(3), Subnet: subnet(3), Root: addr(3, 1), CPUs: 2}
	for i := 1; i <= 2; i++ {
		c.Hosts = append(c.Hosts, Host{Name: nsName(3, i), Addr: addr(3, i+1), Link: linkName(3, i),
			NetNS: "/run/netns/" + nsName(3, i), UTS: filepath.Join(c.Dir, "uts", nsName(3, i))})
	}
	return c
}

func TestHostLookup(t *testing.T) {
	c := fake()
	for _, tc := range []struct {
		name, want, err string
	}{
		{"gotune3-h1", "gotune3-h1", ""},
		{"10.213.3.3", "gotune3-h2", ""},
		{"2", "gotune3-h2", ""},
		{"root", "root", ""},
		{"10.213.3.1", "root", ""},
		{"3", "", `no host "3" (hosts: root, gotune3-h1, gotune3-h2, or their addresses, or 1 to 2)`},
		{"gotune0-h1", "", `no host "gotune0-h1"`},
	} {
		h, err := c.Host(tc.name)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Host(%q): %v, want error %q", tc.name, err, tc.err)
		case tc.err == "" && (err != nil || h.Name != tc.want):
			t.Errorf("Host(%q) = %q, %v; want %q", tc.name, h.Name, err, tc.want)
		}
	}
	if got := c.RootHost().Argv("true"); strings.Join(got, " ") != "true" {
		t.Errorf("root Argv: %q", got)
	}
	if got, want := strings.Join(c.Hosts[0].Argv("hostname", "-s"), " "),
		"nsenter --net=/run/netns/gotune3-h1 --uts=/run/gotune-cluster/3/uts/gotune3-h1 -- hostname -s"; got != want {
		t.Errorf("Argv: %q, want %q", got, want)
	}
}

// The generated files: the agent script and slurm.conf.
func TestGeneratedFiles(t *testing.T) {
	c := fake()
	conf, err := c.slurmConf(c.newSlurm())
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]string{
		"agent": c.agentScript(), "slurm.conf": string(conf),
	} {
		testutil.Golden(t, filepath.Join("testdata", name), []byte(got), *update)
	}
}

func TestUpRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{{Hosts: 0}, {Hosts: MaxHosts + 1}, {Hosts: 1, Slot: MaxSlots}} {
		if _, err := Up(context.Background(), cfg); err == nil {
			t.Errorf("Up(%+v): no error", cfg)
		}
	}
}
