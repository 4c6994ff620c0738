// Package launchenv reads what an external launcher tells the processes it
// starts: rank, size, rank and size on the node, node index and job id,
// from the environment of Open MPI's mpirun, MPICH's Hydra (mpiexec) and
// Slurm's srun. gotune's own launcher (internal/launch) starts ranks it
// knows; under mpirun or srun a rank learns who it is from here.
package launchenv
