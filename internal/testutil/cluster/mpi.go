package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Files the MPI launchers read, under Dir.
const (
	hostfileName  = "hostfile"    // Open MPI: "ADDR slots=N" lines
	hydraHostName = "hydra-hosts" // MPICH's Hydra: "ADDR:N" lines
	agentName     = "agent"       // the rsh agent both launch through
)

// Hostfile is Open MPI's hostfile naming the hosts by address, each with
// c.CPUs slots. Addresses, not hostnames: the hosts' names resolve nowhere
// (this machine's /etc/hosts is left alone), and mpirun must see that none
// of them is local (the bridge's own address, c.Root, is).
func (c *Cluster) Hostfile() string { return filepath.Join(c.Dir, hostfileName) }

// Agent is the rsh agent script: called as ssh is (options, host, then
// the command line as words for a shell), it runs the command line with
// /bin/sh on that host (nsenter into its namespaces) instead of logging
// in. It knows each host by name and address.
func (c *Cluster) Agent() string { return filepath.Join(c.Dir, agentName) }

// MpirunArgs are the arguments Open MPI's mpirun (4.1) needs to start
// processes on the hosts, before the caller's own (-np, --map-by, the
// program): the hostfile; the agent instead of ssh; the out-of-band and
// btl tcp traffic kept on the bridge's subnet (the hosts' eth0; lo and
// this machine's other interfaces are not between hosts); and
// --allow-run-as-root, since the hosts need root. With --map-by node,
// consecutive ranks go to different hosts. Locality comes from the
// hostnames, so ranks on different hosts talk over btl tcp (or what
// --mca pml/btl choose), never shared memory.
func (c *Cluster) MpirunArgs() []string {
	args := []string{
		"--hostfile", c.Hostfile(),
		"--mca", "plm_rsh_agent", c.Agent(),
		"--mca", "oob_tcp_if_include", c.Subnet,
		"--mca", "btl_tcp_if_include", c.Subnet,
	}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	return args
}

// Mpirun is mpirun with MpirunArgs and then args, run from the root
// namespace.
func (c *Cluster) Mpirun(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "mpirun", append(c.MpirunArgs(), args...)...)
}

// MpiexecArgs are the arguments MPICH's Hydra mpiexec (4.0) needs: the
// agent as its ssh launcher, the hosts by address, and -localhost: the
// address the proxies on the hosts call back (Hydra would send this
// machine's hostname, which resolves to an address the hosts cannot reach).
func (c *Cluster) MpiexecArgs() []string {
	return []string{
		"-launcher", "ssh", "-launcher-exec", c.Agent(),
		"-f", filepath.Join(c.Dir, hydraHostName),
		"-localhost", c.Root,
	}
}

// Mpiexec is MPICH's mpiexec (mpiexec.mpich: Debian's mpiexec may be Open
// MPI's) with MpiexecArgs and then args.
func (c *Cluster) Mpiexec(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "mpiexec.mpich", append(c.MpiexecArgs(), args...)...)
}

// writeLauncherFiles writes the hostfiles and the agent.
func (c *Cluster) writeLauncherFiles() error {
	var ompi, hydra strings.Builder
	for _, h := range c.Hosts {
		fmt.Fprintf(&ompi, "%s slots=%d\n", h.Addr, c.CPUs)
		fmt.Fprintf(&hydra, "%s:%d\n", h.Addr, c.CPUs)
	}
	for name, text := range map[string]string{
		hostfileName:  ompi.String(),
		hydraHostName: hydra.String(),
	} {
		if err := os.WriteFile(filepath.Join(c.Dir, name), []byte(text), 0o644); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	if err := os.WriteFile(c.Agent(), []byte(c.agentScript()), 0o755); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// agentScript is the rsh agent. ssh joins its command words with spaces
// and hands the line to the login shell; the agent does the same with
// /bin/sh (Open MPI's and Hydra's command lines are written for that:
// "PATH=...; export PATH; orted ..." with quoted arguments). It skips
// ssh-style options (Hydra passes -x).
func (c *Cluster) agentScript() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# gotune cluster %d: rsh agent for mpirun/mpiexec (internal/testutil/cluster)\n", c.Slot)
	b.WriteString("while [ $# -gt 0 ]; do case \"$1\" in -*) shift ;; *) break ;; esac; done\n")
	b.WriteString("host=$1; shift\n")
	b.WriteString("case \"$host\" in\n")
	for _, h := range c.Hosts {
		argv := h.Argv("/bin/sh", "-c")
		fmt.Fprintf(&b, "%s|%s) set -- %s \"$*\" ;;\n", h.Addr, h.Name, strings.Join(argv, " "))
	}
	fmt.Fprintf(&b, "*) echo \"gotune agent: no host $host in cluster %d\" >&2; exit 255 ;;\n", c.Slot)
	b.WriteString("esac\nexec \"$@\"\n")
	return b.String()
}
