package sweep

// What a report draws of the decisions, exported from the rules that made
// them so that the drawing cannot drift from the decision.

// NodeBytes is the shared memory of sm's channels with ranks ranks on a
// node: a cell FIFO of depth cells of cell bytes per ordered pair, a ring
// of slots fragments of frag bytes per rank.
func NodeBytes(depth, cell, frag, slots, ranks int) int64 {
	return nodeBytes(SMParams{Depth: depth, Cell: cell, Frag: frag, Slots: slots}, ranks)
}

// PairBytes is the shared memory of one ordered pair's cell FIFO.
func PairBytes(depth, cell int) int64 {
	return int64(SMParams{Depth: depth, Cell: cell}.channels().PairBytes())
}

// MemoryShare: channel memory is affordable on a node when, with one rank
// per core, it takes at most 1/MemoryShare of the node's memory.
const MemoryShare = memoryShare
