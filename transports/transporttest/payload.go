package transporttest

import (
	"errors"
	"fmt"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
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

// Truncate sends n bytes of message seed from rank 0 of a pair to rank 1,
// which receives them into into bytes of rbuf: it wants ErrTruncated and
// the message's first into bytes. rank is the calling rank.
func Truncate(tr transports.Transport, rank int, sbuf, rbuf []byte, n, into, seed int) error {
	if rank == 0 {
		Pattern(sbuf[:n], seed)
		return tr.Send(1, sbuf[:n])
	}
	got, err := tr.Recv(0, rbuf[:into])
	if !errors.Is(err, transports.ErrTruncated) {
		return fmt.Errorf("%d bytes into %d: %v, want truncated", n, into, err)
	}
	if got != into {
		return fmt.Errorf("%d bytes into %d: took %d", n, into, got)
	}
	return Verify(rbuf[:into], seed, fmt.Sprintf("truncated %d into %d", n, into))
}

// InStep exchanges a 4-byte message each way with peer: the pair is still
// in step (after truncations, say). The send is posted first, since two
// blocking sends without an eager protocol would wait for each other.
func InStep(tr transports.Transport, peer int, sbuf, rbuf []byte) error {
	q, err := tr.Isend(peer, sbuf[:4])
	if err != nil {
		return err
	}
	if _, err := tr.Recv(peer, rbuf[:4]); err != nil {
		return err
	}
	return tr.Wait(q)
}

// Survive is rank 0 of a pair whose rank 1 leaves in the middle of a
// rendezvous: as sender it posts buf to rank 1 before the pair's barrier,
// as receiver it receives into buf after it. gone, when given, runs after
// the barrier (to wait for the peer's exit, say). It returns the error the
// survivor saw, as text; seeing none is the rank's failure.
func Survive(r *launch.Rank, tr transports.Transport, sender bool, buf []byte, gone func() error) (string, error) {
	var q transports.Request
	var err error
	if sender {
		if q, err = tr.Isend(1, buf); err != nil {
			return "", err
		}
	}
	if err := r.Barrier(); err != nil {
		return "", err
	}
	if gone != nil {
		if err := gone(); err != nil {
			return "", err
		}
	}
	if sender {
		err = tr.Wait(q)
	} else {
		_, err = tr.Recv(1, buf)
	}
	if err == nil {
		return "", errors.New("survivor saw no error")
	}
	return err.Error(), nil
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
