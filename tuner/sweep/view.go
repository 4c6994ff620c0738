package sweep

// What a report draws of the decisions, exported from the rules that made
// them so that the drawing cannot drift from the decision.

// PairBytes is the channel memory of one ordered pair with FIFO depth cells
// of cell bytes and a ring of slots fragments of frag bytes.
func PairBytes(depth, cell, frag, slots int) int64 { return pairBytes(depth, cell, frag, slots) }

// NodeBytes is the channel memory of ranks ranks on a node, every ordered
// pair taking pair bytes.
func NodeBytes(pair int64, ranks int) int64 { return nodeBytes(pair, ranks) }

// MemoryShare: channel memory is affordable on a node when, with one rank
// per core, it takes at most 1/MemoryShare of the node's memory.
const MemoryShare = memoryShare
