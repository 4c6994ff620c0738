// Package native renders a profile's stack decisions (profile.Stack) as the
// config files the stacks themselves read: Open MPI's mca-params.conf,
// MPICH's CVARs as environment lines, UCX's ucx.conf, mimalloc's
// environment, and an MVAPICH2 file derived from the Open MPI and MPICH
// decisions where a parameter has a sound counterpart.
//
// It owns the file formats, their names, the comments that head them (where
// the file goes, what overrides it, which profile, run and stack version the
// values come from) and the evidence comment above every value. It decides
// nothing and measures nothing: the values are the profile's, written as the
// stack reads them. It imports package profile only, so the tuner, the CLI
// and a user's own tool can render the same bytes.
package native
