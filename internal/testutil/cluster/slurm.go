package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

// Slurm is a Slurm cluster (Debian 12's 22.05) on the hosts: munged with
// its own key and socket, slurmctld in the root network namespace under its
// own hostname, and one slurmd per host, all run as root from Debian's
// packages with a slurm.conf of this cluster's own (SLURM_CONF), none of
// /etc's files. Clients (srun, sinfo, squeue, scancel) run anywhere with
// Env.
type Slurm struct {
	Conf        string `json:"conf"`         // slurm.conf; SLURM_CONF of every client
	MungeSocket string `json:"munge_socket"` // munged's socket (slurm.conf's AuthInfo)
	Controller  string `json:"controller"`   // slurmctld's hostname
	Partition   string `json:"partition"`    // the default partition: every host
	Dir         string `json:"dir"`          // state, spool and munge files
}

// SlurmReady bounds how long StartSlurm waits for every node to be idle.
var SlurmReady = 60 * time.Second

// SlurmAvailable reports why a Slurm cluster cannot be started here (nil:
// it can): a missing program of Debian's slurmctld, slurmd, slurm-client or
// munge packages.
func SlurmAvailable() error {
	for _, p := range []string{"slurmctld", "slurmd", "slurmstepd", "srun", "sinfo", "squeue", "scancel", "munged", "mungekey", "munge"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("%s (Debian: slurmctld slurmd slurm-client munge): %w", p, err)
		}
	}
	return nil
}

// slurmConf is this cluster's slurm.conf. Root runs everything (SlurmUser,
// SlurmdUser); proctrack/linuxproc, task/none and no accounting keep
// cgroups, a database and systemd out of it; each slurmd finds its spool
// and pid file by its node name (%n); the controller's port and the
// slurmds' are the slot's own; a node that registers is idle at once
// (ReturnToService=2); a cancelled step gets SIGKILL KillWait after
// SIGTERM.
var slurmConf = template.Must(template.New("slurm.conf").Parse(`# gotune cluster {{.Slot}} (internal/testutil/cluster): written at start, removed at stop
ClusterName=gotune{{.Slot}}
SlurmctldHost={{.Controller}}({{.Root}})
SlurmctldPort={{.CtlPort}}
SlurmdPort={{.DPort}}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={{.Munge}}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={{.Dir}}/state
SlurmdSpoolDir={{.Dir}}/spool/%n
SlurmctldPidFile={{.Dir}}/slurmctld.pid
SlurmdPidFile={{.Dir}}/slurmd.%n.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=3
InactiveLimit=0
{{range .Hosts}}NodeName={{.Name}} NodeAddr={{.Addr}} CPUs={{$.CPUs}} State=UNKNOWN
{{end}}PartitionName={{.Partition}} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`))

// StartSlurm starts munged, slurmctld and a slurmd per host, and waits
// (polling sinfo, up to SlurmReady) until every node is idle.
func (c *Cluster) StartSlurm(ctx context.Context) (s *Slurm, err error) {
	if c.Slurm != nil {
		return nil, fmt.Errorf("cluster %d: Slurm already runs (%s)", c.Slot, c.Slurm.Conf)
	}
	s = c.newSlurm()
	dir := s.Dir
	c.Slurm = s
	defer func() {
		if err != nil {
			if serr := c.StopSlurm(); serr != nil {
				err = fmt.Errorf("%w (and stopping it: %v)", err, serr)
			}
		}
	}()
	// munged checks its files: the socket's directories must be searchable
	// by all, the key readable by its owner only.
	mkdirs := []string{filepath.Join(dir, "munge"), filepath.Join(dir, "state")}
	for _, h := range c.Hosts {
		mkdirs = append(mkdirs, filepath.Join(dir, "spool", h.Name))
	}
	for _, d := range mkdirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("slurm: %w", err)
		}
	}
	key := filepath.Join(dir, "munge", "munge.key")
	if err := run(ctx, nil, "mungekey", "--create", "--keyfile="+key); err != nil {
		return nil, fmt.Errorf("slurm: %w", err)
	}
	if _, err := c.startDaemon("slurm-munged", []string{"munged", "--foreground",
		"--socket=" + s.MungeSocket, "--key-file=" + key,
		"--log-file=" + filepath.Join(dir, "munge", "munged.log"),
		"--pid-file=" + filepath.Join(dir, "munge", "munged.pid"),
		"--seed-file=" + filepath.Join(dir, "munge", "munged.seed")}, nil); err != nil {
		return nil, fmt.Errorf("slurm: %w", err)
	}
	if err := poll(ctx, 20*time.Second, func() error {
		return run(ctx, nil, "munge", "--no-input", "--socket="+s.MungeSocket, "--output=/dev/null")
	}); err != nil {
		return nil, fmt.Errorf("slurm: munged not answering: %w; %s", err, tail(filepath.Join(c.Dir, "log", "slurm-munged.log")))
	}

	conf, err := c.slurmConf(s)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.Conf, conf, 0o644); err != nil {
		return nil, fmt.Errorf("slurm: %w", err)
	}

	// slurmctld refuses to run on a host not named in SlurmctldHost: it
	// gets a UTS namespace of its own, in the root network namespace.
	ctl := Host{Name: s.Controller, Addr: c.Root, UTS: filepath.Join(c.Dir, "uts", s.Controller)}
	if err := os.WriteFile(ctl.UTS, nil, 0o644); err != nil {
		return nil, fmt.Errorf("slurm: %w", err)
	}
	if err := run(ctx, nil, "unshare", "--uts="+ctl.UTS, "hostname", ctl.Name); err != nil {
		return nil, fmt.Errorf("slurm: controller's hostname: %w", err)
	}
	if _, err := c.startDaemon("slurm-slurmctld", ctl.Argv("slurmctld", "-D", "-c", "-f", s.Conf), nil); err != nil {
		return nil, fmt.Errorf("slurm: %w", err)
	}
	for _, h := range c.Hosts {
		if _, err := c.startDaemon("slurm-slurmd-"+h.Name, h.Argv("slurmd", "-D", "-f", s.Conf), nil); err != nil {
			return nil, fmt.Errorf("slurm: %w", err)
		}
	}
	if err := s.WaitIdle(ctx, SlurmReady); err != nil {
		return nil, fmt.Errorf("%w; %s; %s", err, tail(filepath.Join(c.Dir, "log", "slurm-slurmctld.log")),
			tail(filepath.Join(c.Dir, "log", "slurm-slurmd-"+c.Hosts[0].Name+".log")))
	}
	return s, nil
}

// newSlurm names the Slurm cluster's files and hosts.
func (c *Cluster) newSlurm() *Slurm {
	dir := filepath.Join(c.Dir, "slurm")
	return &Slurm{
		Conf: filepath.Join(dir, "slurm.conf"), MungeSocket: filepath.Join(dir, "munge", "socket"),
		Controller: fmt.Sprintf("gotune%d-ctl", c.Slot), Partition: "gotune", Dir: dir,
	}
}

// slurmConf renders slurm.conf for s on c's hosts.
func (c *Cluster) slurmConf(s *Slurm) ([]byte, error) {
	var conf bytes.Buffer
	if err := slurmConf.Execute(&conf, map[string]any{
		"Slot": c.Slot, "Controller": s.Controller, "Root": c.Root,
		"CtlPort": 26817 + 2*c.Slot, "DPort": 26818 + 2*c.Slot,
		"Munge": s.MungeSocket, "Dir": s.Dir, "Hosts": c.Hosts, "CPUs": c.CPUs, "Partition": s.Partition,
	}); err != nil {
		return nil, fmt.Errorf("slurm.conf: %w", err)
	}
	return conf.Bytes(), nil
}

// StopSlurm stops the slurmds, slurmctld and munged, and removes their
// files. Steps still running on the hosts are not stopped (Down kills
// everything in the hosts).
func (c *Cluster) StopSlurm() error {
	if c.Slurm == nil {
		return nil
	}
	err := c.stopDaemons("slurm-")
	if rerr := removeDir(c.Slurm.Dir); rerr != nil && err == nil {
		err = rerr
	}
	_ = removeDir(filepath.Join(c.Dir, "uts", c.Slurm.Controller))
	c.Slurm = nil
	if serr := c.save(); serr != nil && err == nil {
		err = serr
	}
	return err
}

// Env is what a Slurm client needs in its environment: SLURM_CONF (which
// names munged's socket too).
func (s *Slurm) Env() []string { return []string{"SLURM_CONF=" + s.Conf} }

// Command is a Slurm client (srun, sinfo, squeue, scancel, salloc, sbatch)
// with this process's environment and Env.
func (s *Slurm) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), s.Env()...)
	return cmd
}

// Srun is srun with args, from the root namespace: srun -N2 -n2 PROG runs
// a task of PROG on each of two hosts, with Slurm's variables
// (SLURM_PROCID, SLURM_NTASKS, SLURM_NODEID, SLURM_LOCALID,
// SLURM_STEP_TASKS_PER_NODE, SLURM_JOB_ID) and srun's environment.
func (s *Slurm) Srun(ctx context.Context, args ...string) *exec.Cmd {
	return s.Command(ctx, "srun", args...)
}

// WaitIdle polls sinfo until every node of the partition is idle.
func (s *Slurm) WaitIdle(ctx context.Context, d time.Duration) error {
	return poll(ctx, d, func() error {
		out, err := s.Command(ctx, "sinfo", "-h", "-N", "-p", s.Partition, "-o", "%N %t").Output()
		if err != nil {
			return fmt.Errorf("sinfo: %w", err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		for _, l := range lines {
			if f := strings.Fields(l); len(f) != 2 || f[1] != "idle" {
				return fmt.Errorf("sinfo: nodes not idle: %s", strings.Join(lines, "; "))
			}
		}
		return nil
	})
}

// poll calls f until it returns nil, for up to d (every 50 ms), and
// returns f's last error if it never did.
func poll(ctx context.Context, d time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %v: %w", d, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
