package sm

import (
	"encoding/binary"
	"fmt"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

// RingCheck proves, between live ranks, that each can single-copy from the
// previous one, as a driver's Check: every rank writes a marker word,
// publishes it (publish returns the handle the peer copies through, its
// address or a cookie, and how to withdraw it) and sends the handle to the
// next rank, which reads the marker with read and compares. No rank
// returns before every read is done, so each withdraws its marker only
// then. name prefixes the errors ("cma check: ...").
func RingCheck(t transports.Transport, env transports.Env, name string,
	publish func(marker []byte) (handle uint64, withdraw func(), err error),
	read func(prev int, handle uint64, got []byte) error) error {
	if env.Size < 2 {
		return nil
	}
	buf, err := sys.MapAnon(3*8, true)
	if err != nil {
		return err
	}
	defer sys.Unmap(buf)
	marker, word, got := buf[0:8], buf[8:16], buf[16:24]
	copy(marker, "gotune\x00\x01")
	handle, withdraw, err := publish(marker)
	if err != nil {
		return fmt.Errorf("%s check: %w", name, err)
	}
	defer withdraw()
	next, prev := (env.Rank+1)%env.Size, (env.Rank+env.Size-1)%env.Size
	binary.LittleEndian.PutUint64(word, handle)
	if err := t.Send(next, word); err != nil {
		return fmt.Errorf("%s check: %w", name, err)
	}
	if _, err := t.Recv(prev, word); err != nil {
		return fmt.Errorf("%s check: %w", name, err)
	}
	cerr := read(prev, binary.LittleEndian.Uint64(word), got)
	if cerr == nil && string(got) != string(marker) {
		cerr = fmt.Errorf("%s check: read %q from rank %d, want %q", name, got, prev, marker)
	}
	// Everyone must finish reading before anyone withdraws its marker.
	flag := word[:1]
	if err := t.Send(prev, flag); err != nil {
		return err
	}
	if _, err := t.Recv(next, flag); err != nil {
		return err
	}
	return cerr
}

// AddressHandle publishes a marker by its address, for mechanisms that
// read a peer's memory by address (CMA, XPMEM); nothing to withdraw.
func AddressHandle(marker []byte) (uint64, func(), error) {
	return uint64(sys.AddressOf(marker)), func() {}, nil
}
