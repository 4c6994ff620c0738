// Package mpistack measures MPI stacks with gotune's own reference benchmark,
// so gotune's transports can be compared with an established implementation
// on the same machine, pattern by pattern and size by size.
//
// It owns anchor.c, a small MPI program with OSU's loops (embedded, compiled
// at run time with the stack's compiler wrapper), optional payload
// validation and the stack hazards h2h and flood; the launcher
// configurations of the stacks it measures (Open MPI's ob1/vader, MPICH
// under Hydra), each able to carry a tuned file in its environment; Check,
// which runs the hazards and tells a hang, a corruption and a crash apart;
// RunUCX, which measures UCX through ucx_perftest; the parsing of the
// programs' output into bench.Result values summarized exactly like
// gotune's own; and the side-by-side ratio table that compares them.
package mpistack
