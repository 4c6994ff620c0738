// Package atomicfile owns writing a file whole or not at all: the profile,
// the stacks' native files, the report and the launcher's rendezvous file
// are all read by other processes while they may be rewritten.
package atomicfile
