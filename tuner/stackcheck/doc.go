// Package stackcheck says what an MPI stack will really use when a tuned
// file is loaded as its users load it, and where something of higher
// precedence silently overrides the file.
//
// It owns the parsers of the native files gotune renders
// (openmpi-mca-params.conf, mpich.env, ucx.conf, mimalloc.env), the readers
// of each stack's own account of its settings (ompi_info --all --parsable;
// MPICH's control variables through MPI_T, by cvars.c, embedded and compiled
// at run time with mpicc.mpich; ucx_info -c; mimalloc's verbose start-up
// lines), the comparison of the two with the caller's environment and the
// stack's other configuration files, and the report gotune check prints.
//
// Gathering runs the stack's tools; judging is a pure function of their
// recorded outputs, so the rules are tested on captured outputs and the
// gathering end to end against the real stacks.
package stackcheck
