package sm

// The cells on a channel: kinds and the control words they carry.

import (
	"encoding/binary"

	"github.com/gotune/gotune/internal/sys"
)

// Cell kinds.
const (
	kindEager     uint8 = iota + 1 // payload inline
	kindFrag                       // payload in the fragment ring, length in the header; word 0 = message size, word 1 = message number
	kindRTS                        // rendezvous request: size, sender address, sender request id, sender's Place, sender's handle (Exporter; 0: none)
	kindCTS                        // push rendezvous: sender id, receiver id, receiver address, capacity, receiver's handle (Exporter; 0: none)
	kindFIN                        // rendezvous completion: request id, status, errno
	kindResend                     // pull receiver could not single-copy: sender id, receiver id, errno
	kindFallback                   // push sender could not single-copy: receiver id, errno
	kindFragTo                     // payload in the fragment ring for receive request word 0
	kindStream                     // receiver routes this one message through the fragments: sender id, receiver id
	kindSplit                      // split rendezvous: sender id, receiver id, receiver address, bytes to move, where the sender's part starts
	kindSplitBack                  // split sender could not copy its part (refused): receiver id, errno
	kindPacked                     // several eager messages, each a record (pack.go); the header's length is the records' bytes
)

const ctrlPayload = 40 // five little-endian words

type ctrlMsg struct {
	kind  uint8
	words [5]uint64
}

func putWords(b []byte, w []uint64) {
	for i, v := range w {
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
}

func getWords(b []byte) (w [5]uint64) {
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return w
}

func addressOf(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return sys.AddressOf(b)
}
