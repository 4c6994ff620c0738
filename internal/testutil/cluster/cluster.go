package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Base holds every cluster's state, one directory per slot. It is under
// /run (a tmpfs: a reboot forgets it, as it forgets the namespaces).
const Base = "/run/gotune-cluster"

// MaxSlots bounds how many clusters live at once (concurrent test binaries,
// a cluster a person brought up with scripts/nshosts).
const MaxSlots = 16

// MaxHosts bounds a cluster's hosts: their addresses are .2 to .201 of the
// slot's /24.
const MaxHosts = 200

// Config says what Up builds.
type Config struct {
	Hosts int // namespace-hosts, 1 to MaxHosts
	// CPUs each host offers (mpirun's hostfile slots, Slurm's CPUs=); 0 is
	// runtime.NumCPU(). The hosts share this machine's CPUs.
	CPUs int
	// Detach makes the cluster outlive this process (scripts/nshosts up): its
	// daemons start in their own sessions, and no later Up removes it as
	// stale; Down (nshosts down) does. Otherwise the daemons die with this
	// process (parent-death signal) and a later Up removes the rest.
	Detach bool
	// Slot asks for this slot (0 to MaxSlots-1); -1 takes the first free one.
	Slot int
}

// Cluster is one set of namespace-hosts and what runs on them. Its
// exported fields are also its state file (Dir/cluster.json), which
// scripts/nshosts and a later Up read.
type Cluster struct {
	Slot    int      `json:"slot"`
	Dir     string   `json:"dir"`    // Base/<slot>
	Bridge  string   `json:"bridge"` // in the root namespace
	Subnet  string   `json:"subnet"` // 10.213.<slot>.0/24
	Root    string   `json:"root"`   // the root namespace's address on the bridge (.1)
	CPUs    int      `json:"cpus"`
	Owner   Proc     `json:"owner"` // PID 0: detached
	Hosts   []Host   `json:"hosts"`
	Daemons []Daemon `json:"daemons,omitempty"`
	Slurm   *Slurm   `json:"slurm,omitempty"`

	mu sync.Mutex // Daemons and the state file
}

// Host is one namespace-host: a network namespace and a UTS namespace
// whose hostname is Name.
type Host struct {
	Name  string `json:"name"`  // hostname and network namespace name (gotune<slot>-h<i>)
	Addr  string `json:"addr"`  // IPv4 address of its eth0, on Subnet
	NetNS string `json:"netns"` // /run/netns/<Name>; "" is the root namespace
	UTS   string `json:"uts"`   // bind mount of its UTS namespace; "" is the root's
	Link  string `json:"link"`  // root-side end of its veth, in Bridge
}

// Proc identifies a process across PID reuse: its PID and its start time
// (clock ticks after boot, /proc/PID/stat field 22).
type Proc struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// Daemon is a process the cluster started and stops at Down.
type Daemon struct {
	Name string `json:"name"`
	Proc
	Log string `json:"log"`
}

// Names of a slot's objects: all carry a gotune prefix, so that leftovers
// are recognisable, and the slot number, so that slots never clash.
func nsName(slot, i int) string   { return fmt.Sprintf("gotune%d-h%d", slot, i) }
func linkName(slot, i int) string { return fmt.Sprintf("gt%dh%d", slot, i) }
func bridgeName(slot int) string  { return fmt.Sprintf("gotune%dbr", slot) }
func subnet(slot int) string      { return fmt.Sprintf("10.213.%d.0/24", slot) }
func addr(slot, last int) string  { return fmt.Sprintf("10.213.%d.%d", slot, last) }
func slotDir(slot int) string     { return filepath.Join(Base, strconv.Itoa(slot)) }

// Available reports why namespace-hosts cannot be made here (nil: they
// can): not root, or ip, nsenter or unshare missing, or the kernel refusing
// a new network and UTS namespace.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root (CAP_SYS_ADMIN, CAP_NET_ADMIN)")
	}
	for _, p := range []string{"ip", "nsenter", "unshare", "mount", "umount"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	if out, err := exec.Command("unshare", "--net", "--uts", "true").CombinedOutput(); err != nil {
		return fmt.Errorf("unshare --net --uts: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// Up builds a cluster of cfg.Hosts namespace-hosts on the bridge of a free
// slot, after removing what a dead owner left in it.
func Up(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Hosts < 1 || cfg.Hosts > MaxHosts {
		return nil, fmt.Errorf("cluster: %d hosts: want 1 to %d", cfg.Hosts, MaxHosts)
	}
	if cfg.Slot >= MaxSlots {
		return nil, fmt.Errorf("cluster: slot %d: want 0 to %d (or -1: any)", cfg.Slot, MaxSlots-1)
	}
	if err := os.MkdirAll(Base, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	owner := Proc{}
	if !cfg.Detach {
		var err error
		if owner, err = self(); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	slot, err := claim(owner, cfg.Slot)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		Slot: slot, Dir: slotDir(slot), Bridge: bridgeName(slot), Subnet: subnet(slot),
		Root: addr(slot, 1), CPUs: cfg.CPUs, Owner: owner,
	}
	if c.CPUs <= 0 {
		c.CPUs = runtime.NumCPU()
	}
	// The slot is ours; what a dead owner left under its names goes first.
	if err := removeNetwork(ctx, slot); err != nil {
		c.release()
		return nil, err
	}
	if err := c.build(ctx, cfg.Hosts); err != nil {
		if derr := c.Down(); derr != nil {
			err = fmt.Errorf("%w (and removing it: %v)", err, derr)
		}
		return nil, err
	}
	return c, nil
}

// build creates the bridge, the hosts and the launchers' files.
func (c *Cluster) build(ctx context.Context, n int) error {
	for _, d := range []string{"uts", "log"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	if err := c.save(); err != nil {
		return err
	}
	for _, a := range [][]string{
		{"link", "add", c.Bridge, "type", "bridge"},
		{"addr", "add", c.Root + "/24", "dev", c.Bridge},
		{"link", "set", c.Bridge, "up"},
	} {
		if err := ip(ctx, a...); err != nil {
			return err
		}
	}
	for i := 1; i <= n; i++ {
		h := Host{Name: nsName(c.Slot, i), Addr: addr(c.Slot, i+1), Link: linkName(c.Slot, i)}
		h.NetNS = filepath.Join("/run/netns", h.Name)
		h.UTS = filepath.Join(c.Dir, "uts", h.Name)
		c.Hosts = append(c.Hosts, h) // before it exists: Down removes a half-made host too
		if err := c.save(); err != nil {
			return err
		}
		if err := makeHost(ctx, h, c.Bridge, c.Root); err != nil {
			return err
		}
	}
	if err := c.writeLauncherFiles(); err != nil {
		return err
	}
	return c.save()
}

// makeHost creates one host: its network namespace with lo up, a veth
// (eth0 inside, Link in the bridge) with its address and a default route
// to the root namespace, and its UTS namespace with its hostname.
func makeHost(ctx context.Context, h Host, bridge, root string) error {
	for _, a := range [][]string{
		{"netns", "add", h.Name},
		{"link", "add", h.Link, "type", "veth", "peer", "name", "eth0", "netns", h.Name},
		{"link", "set", h.Link, "master", bridge, "up"},
		{"-n", h.Name, "addr", "add", h.Addr + "/24", "dev", "eth0"},
		{"-n", h.Name, "link", "set", "eth0", "up"},
		{"-n", h.Name, "link", "set", "lo", "up"},
		// Packets elsewhere die in the root namespace (no forwarding), but a
		// program that finds its address by the default route finds eth0's.
		{"-n", h.Name, "route", "add", "default", "via", root},
	} {
		if err := ip(ctx, a...); err != nil {
			return fmt.Errorf("host %s: %w", h.Name, err)
		}
	}
	if err := os.WriteFile(h.UTS, nil, 0o644); err != nil {
		return fmt.Errorf("host %s: %w", h.Name, err)
	}
	// unshare binds the new UTS namespace onto h.UTS, which keeps it alive.
	if err := run(ctx, nil, "unshare", "--uts="+h.UTS, "hostname", h.Name); err != nil {
		return fmt.Errorf("host %s: hostname: %w", h.Name, err)
	}
	return nil
}

// Argv returns argv run on the host: through nsenter into its network and
// UTS namespaces (the filesystem, PIDs and users stay this machine's).
func (h Host) Argv(argv ...string) []string {
	if h.NetNS == "" && h.UTS == "" {
		return slices.Clone(argv)
	}
	pre := []string{"nsenter"}
	if h.NetNS != "" {
		pre = append(pre, "--net="+h.NetNS)
	}
	if h.UTS != "" {
		pre = append(pre, "--uts="+h.UTS)
	}
	return append(append(pre, "--"), argv...)
}

// Command is exec.CommandContext of name and args run on the host.
func (h Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := h.Argv(append([]string{name}, args...)...)
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// RootHost is the root namespace as a host: it reaches every host at its
// address through the bridge, at c.Root.
func (c *Cluster) RootHost() Host {
	return Host{Name: "root", Addr: c.Root}
}

// Host finds a host by hostname, address, or index from 1; "root" (or the
// root's address) is RootHost.
func (c *Cluster) Host(name string) (Host, error) {
	if name == "root" || name == c.Root {
		return c.RootHost(), nil
	}
	for i, h := range c.Hosts {
		if name == h.Name || name == h.Addr || name == strconv.Itoa(i+1) {
			return h, nil
		}
	}
	names := []string{"root"}
	for _, h := range c.Hosts {
		names = append(names, h.Name)
	}
	return Host{}, fmt.Errorf("cluster %d: no host %q (hosts: %s, or their addresses, or 1 to %d)", c.Slot, name, strings.Join(names, ", "), len(c.Hosts))
}

// Down stops the cluster's daemons, kills whatever else still runs in its
// hosts, and removes the hosts, the bridge, the mounts and the state
// directory. It can be called again after an error.
func (c *Cluster) Down() error {
	var errs []error
	c.mu.Lock()
	ds := slices.Clone(c.Daemons)
	c.mu.Unlock()
	for _, d := range slices.Backward(ds) {
		if err := stop(d.Proc); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", d.Name, err))
		}
	}
	ctx := context.Background()
	if err := removeNetwork(ctx, c.Slot); err != nil {
		errs = append(errs, err)
	}
	if err := removeDir(c.Dir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("cluster %d down: %w", c.Slot, errors.Join(errs...))
	}
	return nil
}

// release gives the slot back before anything was built in it.
func (c *Cluster) release() { _ = removeDir(c.Dir) }

// save writes the state file (atomically: a reader sees the old or the new).
func (c *Cluster) save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("cluster state: %w", err)
	}
	tmp := filepath.Join(c.Dir, ".cluster.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cluster state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(c.Dir, "cluster.json")); err != nil {
		return fmt.Errorf("cluster state: %w", err)
	}
	return nil
}

// Load reads the state of the cluster in slot (for scripts/nshosts, which
// works on a cluster another process brought up).
func Load(slot int) (*Cluster, error) {
	path := filepath.Join(slotDir(slot), "cluster.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster %d: %w", slot, err)
	}
	c := &Cluster{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// List returns the clusters that exist, by slot, with whether their owner
// is alive (a detached cluster's always is).
func List() (clusters []*Cluster, live []bool, err error) {
	for slot := range MaxSlots {
		c, err := Load(slot)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		clusters = append(clusters, c)
		live = append(live, c.Owner.PID == 0 || alive(c.Owner))
	}
	return clusters, live, nil
}

// claim takes a slot for owner: the wanted one, or the first whose
// directory is free or whose owner is dead. A directory is taken by
// renaming a prepared one (holding the owner file) onto it, which fails
// when it exists: two processes never both win. A dead owner's directory
// is first renamed away (again, one process wins), and its leftovers
// removed.
func claim(owner Proc, want int) (int, error) {
	sweepAside()
	var busy []string
	for slot := range MaxSlots {
		if want >= 0 && slot != want {
			continue
		}
		dir := slotDir(slot)
		if prev, err := readOwner(dir); err == nil {
			if prev.PID == 0 || alive(prev) {
				busy = append(busy, fmt.Sprintf("%d (pid %d)", slot, prev.PID))
				continue
			}
			aside := filepath.Join(Base, fmt.Sprintf(".stale-%d-%s", slot, token()))
			if err := os.Rename(dir, aside); err != nil {
				continue // another process won the stale slot
			}
			// Its daemons died with it (parent-death signal), unless that
			// failed: stop any still recorded, then drop the directory.
			if b, err := os.ReadFile(filepath.Join(aside, "cluster.json")); err == nil {
				var old Cluster
				if json.Unmarshal(b, &old) == nil {
					for _, d := range old.Daemons {
						_ = stop(d.Proc)
					}
				}
			}
			_ = removeDir(aside)
		} else if !errors.Is(err, os.ErrNotExist) {
			// A directory without a readable owner: a claim cut short
			// before the rename cannot leave one, so it is foreign; leave it.
			busy = append(busy, fmt.Sprintf("%d (%v)", slot, err))
			continue
		}
		tmp := filepath.Join(Base, fmt.Sprintf(".claim-%d-%s", os.Getpid(), token()))
		if err := os.Mkdir(tmp, 0o755); err != nil {
			return 0, fmt.Errorf("cluster: %w", err)
		}
		b, _ := json.Marshal(owner)
		if err := os.WriteFile(filepath.Join(tmp, "owner"), b, 0o644); err != nil {
			os.RemoveAll(tmp)
			return 0, fmt.Errorf("cluster: %w", err)
		}
		if err := os.Rename(tmp, dir); err != nil {
			os.RemoveAll(tmp)
			busy = append(busy, fmt.Sprintf("%d (taken meanwhile)", slot))
			continue
		}
		return slot, nil
	}
	return 0, fmt.Errorf("cluster: no free slot under %s: busy %s (scripts/nshosts list; nshosts down removes detached ones)", Base, strings.Join(busy, ", "))
}

// sweepAside removes the claim and stale directories of dead processes.
func sweepAside() {
	ents, _ := os.ReadDir(Base)
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, ".claim-") && !strings.HasPrefix(name, ".stale-") {
			continue
		}
		if strings.HasPrefix(name, ".claim-") {
			pid, _ := strconv.Atoi(strings.Split(name, "-")[1])
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
				continue // a claim in progress
			}
		}
		_ = removeDir(filepath.Join(Base, name))
	}
}

func readOwner(dir string) (Proc, error) {
	var p Proc
	b, err := os.ReadFile(filepath.Join(dir, "owner"))
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%s/owner: %w", dir, err)
	}
	return p, nil
}

func token() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// removeNetwork removes a slot's namespaces (killing what still runs in
// them: nothing else lives there), veths and bridge, found by name: it
// works from the names alone, whatever state file a killed run left.
func removeNetwork(ctx context.Context, slot int) error {
	var errs []error
	out, err := output(ctx, "ip", "netns", "list")
	if err != nil {
		return err
	}
	prefix := fmt.Sprintf("gotune%d-", slot)
	for _, line := range strings.Split(out, "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		if pids, err := output(ctx, "ip", "netns", "pids", name); err == nil {
			for _, f := range strings.Fields(pids) {
				if pid, err := strconv.Atoi(f); err == nil {
					if p, err := stat(pid); err == nil {
						if err := stop(p); err != nil {
							errs = append(errs, fmt.Errorf("netns %s: %w", name, err))
						}
					}
				}
			}
		}
		if err := ip(ctx, "netns", "del", name); err != nil {
			errs = append(errs, err)
		}
	}
	// Deleting a veth's end deletes its peer, even in a namespace that a
	// process still holds.
	links, err := output(ctx, "ip", "-o", "link", "show")
	if err != nil {
		return err
	}
	lp := fmt.Sprintf("gt%dh", slot)
	for _, line := range strings.Split(links, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if strings.HasPrefix(name, lp) || name == bridgeName(slot) {
			// A veth whose namespace just went may go meanwhile.
			if err := ip(ctx, "link", "del", name); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeDir unmounts whatever is mounted under dir (the UTS namespaces'
// binds), deepest first, and removes it.
func removeDir(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			mounts = append(mounts, f[4])
		}
	}
	slices.Sort(mounts)
	var errs []error
	for _, m := range slices.Backward(mounts) {
		if err := run(context.Background(), nil, "umount", m); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, fmt.Errorf("cluster: %w", err))
	}
	return errors.Join(errs...)
}

// ip runs ip(8) with args.
func ip(ctx context.Context, args ...string) error { return run(ctx, nil, "ip", args...) }

// run runs a command; its error carries the command line and its output.
func run(ctx context.Context, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// output runs a command and returns its standard output.
func output(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out), nil
}
