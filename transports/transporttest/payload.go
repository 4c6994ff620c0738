package transporttest

import (
	"fmt"

	"github.com/gotune/gotune/internal/sys"
)

// Pattern fills b with message seed's bytes. A prefix of a message is the
// same prefix of the pattern, so a truncated receive checks as one.
func Pattern(b []byte, seed int) {
	for i := range b {
		b[i] = pattern(seed, i)
	}
}

func pattern(seed, i int) byte { return byte(seed*31 + i*7 + i>>9) }

// Verify reports the first byte of b that is not message seed's, naming
// the message by what.
func Verify(b []byte, seed int, what string) error {
	for i := range b {
		if want := pattern(seed, i); b[i] != want {
			return fmt.Errorf("%s: %d bytes, byte %d is %#x, want %#x: payload differs", what, len(b), i, b[i], want)
		}
	}
	return nil
}

// Messages lays one message of each size end to end in a send and a
// receive buffer of fresh anonymous memory.
type Messages struct {
	Sizes      []int
	Send, Recv []byte
	off        []int
}

// NewMessages maps the buffers for messages of sizes.
func NewMessages(sizes []int) (*Messages, error) {
	m := &Messages{Sizes: sizes, off: make([]int, len(sizes)+1)}
	for i, n := range sizes {
		m.off[i+1] = m.off[i] + n
	}
	var err error
	if m.Send, err = sys.MapAnon(m.off[len(sizes)], true); err != nil {
		return nil, err
	}
	if m.Recv, err = sys.MapAnon(m.off[len(sizes)], true); err != nil {
		return nil, err
	}
	return m, nil
}

// Out is message i's send buffer.
func (m *Messages) Out(i int) []byte { return m.Send[m.off[i]:m.off[i+1]] }

// In is message i's receive buffer.
func (m *Messages) In(i int) []byte { return m.Recv[m.off[i]:m.off[i+1]] }

// Fill writes message i's pattern, seed(i), into its send buffer and
// clears its receive buffer.
func (m *Messages) Fill(seed func(i int) int) {
	for i := range m.Sizes {
		Pattern(m.Out(i), seed(i))
		clear(m.In(i))
	}
}

// Verify checks every received message against its pattern, seed(i),
// naming the sending rank.
func (m *Messages) Verify(seed func(i int) int, from int) error {
	for i := range m.Sizes {
		if err := Verify(m.In(i), seed(i), fmt.Sprintf("message %d from rank %d", i, from)); err != nil {
			return err
		}
	}
	return nil
}
