// Package anchor measures MPI stacks with gotune's own reference benchmark,
// so gotune's transports can be compared with an established implementation
// on the same machine, pattern by pattern and size by size.
//
// It owns anchor.c, a small 2-rank MPI program with OSU's loops (embedded,
// compiled at run time with the stack's compiler wrapper), the launcher
// configurations of the stacks it measures (Open MPI's ob1/vader with and
// without CMA single-copy), the parsing of the program's line-oriented
// output into bench.Result values summarized exactly like gotune's own, and
// the side-by-side ratio table that compares the two.
package anchor
