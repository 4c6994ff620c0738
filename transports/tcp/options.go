package tcp

import (
	"fmt"
	"net"
	"strconv"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/msgengine"
)

// Params configure the transport; ParseParams reads them from tcp.* options.
type Params struct {
	Eager    int    // largest message sent inline after its header
	SndBuf   int    // SO_SNDBUF (0: the kernel's default and autotuning)
	RcvBuf   int    // SO_RCVBUF (0: the kernel's default and autotuning)
	NoDelay  bool   // TCP_NODELAY
	Conns    int    // connections per peer; rendezvous payloads are striped over them
	BusyPoll int    // SO_BUSY_POLL in microseconds (0: off)
	ZeroCopy int    // smallest payload write sent with MSG_ZEROCOPY (0: never)
	Addr     string // host:port each rank listens on (port 0: any), or AutoAddr
}

// DefaultEager is the built-in eager limit: Open MPI's btl tcp uses 64 KiB.
const DefaultEager = 64 << 10

// AutoAddr, tcp.addr's default, listens on the rank's address on the job's
// bootstrap network (transports.Env.Addr) when the job spans hosts, else on
// loopback: see listenAddr.
const AutoAddr = "auto"

// Option keys.
const (
	KeyEager, KeySndBuf, KeyRcvBuf, KeyNoDelay  = "tcp.eager", "tcp.sndbuf", "tcp.rcvbuf", "tcp.nodelay"
	KeyConns, KeyBusyPoll, KeyZeroCopy, KeyAddr = "tcp.conns", "tcp.busypoll", "tcp.zerocopy", "tcp.addr"
)

// Options documents the options ParseParams reads.
var Options = &transports.OptionSet{Name: "tcp", Options: []transports.Option{
	msgengine.EagerOption("tcp", "64K", "largest message written right after its header; larger ones wait for the receiver's clear-to-send (rendezvous) and are written straight into the posted buffer"),
	{Key: KeySndBuf, Type: "size", Default: "0", Help: "SO_SNDBUF of every connection (0: the kernel's default, with autotuning)"},
	{Key: KeyRcvBuf, Type: "size", Default: "0", Help: "SO_RCVBUF of every connection, set on the listener before listen so the window scale fits (0: the kernel's default, with autotuning)"},
	{Key: KeyNoDelay, Type: "on|off", Default: "on", Help: "TCP_NODELAY: on sends each message at once, off lets Nagle's algorithm coalesce small writes"},
	{Key: KeyConns, Type: "int", Default: "1", Help: "connections per pair of ranks (at least 1); rendezvous payloads are striped across them, control and eager messages use the first"},
	{Key: KeyBusyPoll, Type: "int", Default: "0", Help: "SO_BUSY_POLL in microseconds (0: off); a kernel that refuses it makes the transport fail to start with a not-supported error"},
	{Key: KeyZeroCopy, Type: "size", Default: "0", Help: "smallest rendezvous stripe written with MSG_ZEROCOPY (0: never); where the kernel refuses SO_ZEROCOPY the transport copies as usual and says so once"},
	{Key: KeyAddr, Type: "text", Default: AutoAddr, Help: "host:port every rank listens on (port 0: one the kernel picks); auto: the rank's address on the job's bootstrap network with port 0 when the job spans hosts, else 127.0.0.1:0; peers learn each rank's address through the job's allgather (a wildcard address publishes the bootstrap address, or loopback)"},
}}

// ParseParams reads tcp.* options.
func ParseParams(o transports.Options) (Params, error) {
	var p Params
	var err error
	if p.Eager, err = o.Int(KeyEager, DefaultEager); err != nil {
		return p, err
	}
	if p.SndBuf, err = o.Int(KeySndBuf, 0); err != nil {
		return p, err
	}
	if p.RcvBuf, err = o.Int(KeyRcvBuf, 0); err != nil {
		return p, err
	}
	nd, err := o.String(KeyNoDelay, "on", "on", "off")
	if err != nil {
		return p, err
	}
	p.NoDelay = nd == "on"
	if p.Conns, err = o.Int(KeyConns, 1); err != nil {
		return p, err
	}
	if p.BusyPoll, err = o.Int(KeyBusyPoll, 0); err != nil {
		return p, err
	}
	if p.ZeroCopy, err = o.Int(KeyZeroCopy, 0); err != nil {
		return p, err
	}
	p.Addr = AutoAddr
	if v, ok := o[KeyAddr]; ok {
		p.Addr = v
	}
	switch {
	case p.Eager < 0 || p.SndBuf < 0 || p.RcvBuf < 0 || p.BusyPoll < 0 || p.ZeroCopy < 0:
		return p, fmt.Errorf("tcp options: eager=%d sndbuf=%d rcvbuf=%d busypoll=%d zerocopy=%d: none may be negative", p.Eager, p.SndBuf, p.RcvBuf, p.BusyPoll, p.ZeroCopy)
	case p.Conns < 1 || p.Conns > maxConns:
		return p, fmt.Errorf("tcp.conns=%d: want 1 to %d", p.Conns, maxConns)
	}
	if _, _, err := net.SplitHostPort(p.Addr); p.Addr != AutoAddr && err != nil {
		return p, fmt.Errorf("tcp.addr=%q: %w", p.Addr, err)
	}
	return p, nil
}

// Options renders p as the options ParseParams reads back into p. Every key
// is written, so the result means the same to a build whose defaults differ.
func (p Params) Options() transports.Options {
	itoa := strconv.Itoa
	return transports.Options{KeyEager: itoa(p.Eager), KeySndBuf: itoa(p.SndBuf), KeyRcvBuf: itoa(p.RcvBuf), KeyNoDelay: transports.Choice(p.NoDelay, "on", "off"),
		KeyConns: itoa(p.Conns), KeyBusyPoll: itoa(p.BusyPoll), KeyZeroCopy: itoa(p.ZeroCopy), KeyAddr: p.Addr}
}

const maxConns = 64
