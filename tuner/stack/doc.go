// Package stack tunes the MPI stacks and allocators people run, through
// themselves. An Adapter names a stack's parameters with the values worth
// weighing (its default first), and measures gotune's reference benchmark
// through the stack with a set of values written as the stack's own config
// file and loaded as a user loads it. Tune weighs one parameter at a time,
// on top of those already decided, in interleaved rounds; a value other
// than the default stands only where it beats the default overall and
// loses at no size. The decisions go into the profile's stacks section,
// from which profile/native renders the files people install.
package stack
