// Package cluster makes hosts out of network namespaces on this machine,
// for tests and measurements that need several nodes: each host is a
// network namespace with its own hostname (UTS namespace), a veth into a
// bridge in the root namespace and an address on a private /24
// (10.213.<slot>.0/24, the root namespace at .1). On those hosts it runs
// Debian's real launchers: Open MPI's mpirun and MPICH's mpiexec through an
// rsh agent script that enters the host instead of ssh, and a Slurm cluster
// (munged, slurmctld, one slurmd per host) that srun and scancel talk to;
// and iperf3 between two hosts, the ceiling of a TCP transport.
//
// Everything it creates is named with a gotune prefix and recorded under
// /run/gotune-cluster/<slot>/, owned by the process that created it: a
// later Up removes what a killed owner left (namespaces, links, mounts,
// daemons), and concurrent test binaries take different slots. It needs
// root (CAP_SYS_ADMIN, CAP_NET_ADMIN), ip, nsenter and unshare; tests skip
// through testutil.SkipUnless with the capabilities "netns" and "slurm".
// docs/testing.md (several hosts on one machine) says what is real and what is not.
package cluster
