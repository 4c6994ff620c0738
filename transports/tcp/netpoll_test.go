package tcp

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports"
)

// The connections are detached from the runtime's netpoller: a socket left
// registered there wakes a runtime thread for every segment and ACK that
// reaches it, which on two cores took CPU from the ranks (docs/transports.md, tcp).
// The listener, which accepts through the runtime, shows the check sees a
// registration.
func TestConnectionsOutsideNetpoller(t *testing.T) {
	for r, got := range results[map[string]int](t, "tcp-netpoll", scenario{Options: transports.Options{"tcp.conns": "3"}}) {
		if got["listener"] != 1 || got["connections"] != 0 {
			t.Errorf("rank %d: registered with the runtime's epoll: %v (want the listener only)", r, got)
		}
	}
}

// netpollRank: which of this rank's sockets the Go runtime's epoll instance
// watches: the listener (it accepts through the runtime), and none of the
// connections (the transport polls them itself).
func netpollRank(r *launch.Rank) (any, error) {
	t, _, err := open(r)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	watched, err := epollTargets()
	if err != nil {
		return nil, err
	}
	rc, err := t.ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		return nil, err
	}
	var lnIno uint64
	rc.Control(func(fd uintptr) { lnIno, err = sockInode(fd) })
	if err != nil {
		return nil, err
	}
	out := map[string]int{"listener": 0, "connections": 0}
	if watched[lnIno] {
		out["listener"]++
	}
	for _, c := range t.conns {
		ino, err := sockInode(c.fd)
		if err != nil {
			return nil, err
		}
		if watched[ino] {
			out["connections"]++
		}
	}
	return out, nil
}

// epollTargets lists the inodes of the files that this process's epoll
// instances watch (/proc/self/fdinfo of each eventpoll descriptor).
func epollTargets() (map[uint64]bool, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	watched := map[uint64]bool{}
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(info), "\n") {
			if !strings.HasPrefix(line, "tfd:") {
				continue
			}
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "ino:"); ok {
					var ino uint64
					if _, err := fmt.Sscanf(v, "%x", &ino); err != nil {
						return nil, fmt.Errorf("fdinfo %s: %q: %w", e.Name(), line, err)
					}
					watched[ino] = true
				}
			}
		}
	}
	return watched, nil
}

// sockInode is the inode of the socket fd refers to.
func sockInode(fd uintptr) (uint64, error) {
	l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return 0, err
	}
	var ino uint64
	if _, err := fmt.Sscanf(l, "socket:[%d]", &ino); err != nil {
		return 0, fmt.Errorf("fd %d is %q: %w", fd, l, err)
	}
	return ino, nil
}
