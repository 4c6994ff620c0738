package ib

import (
	"fmt"
	"strconv"

	"github.com/gotune/gotune/internal/verbs"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/msgengine"
)

// Params configure the transport; ParseParams reads them from ib.* options.
type Params struct {
	Dev     string // device name ("": the first with an active port whose GID is in the caller's network namespace, else the first with an active port)
	Port    int    // port number (0: the device's first active port)
	GID     int    // GID index (-1: the one discovery chooses)
	MTU     int    // path MTU in bytes (0: the port's active MTU, the lower of both ends')
	Eager   int    // largest message sent inline after its header, copied through a slot
	Credits int    // eager receive slots each rank posts for each peer
	Depth   int    // send queue entries a queue pair may have outstanding
	Rndv    string // "read" (the receiver pulls) or "write" (the sender pushes after clear-to-send)
	Wait    string // "poll" (spin on the CQ) or "event" (sleep on the completion channel)
}

// Built-in values: the eager limit is Open MPI openib's 12 KiB neighbourhood
// (rounded to 8 KiB so a slot and its header stay within three pages).
const (
	DefaultEager   = 8 << 10
	DefaultCredits = 32
	DefaultDepth   = 128
)

// Option keys.
const (
	KeyDev, KeyPort, KeyGID, KeyMTU, KeyEager = "ib.dev", "ib.port", "ib.gid", "ib.mtu", "ib.eager"
	KeyCredits, KeyDepth, KeyRndv, KeyWait    = "ib.credits", "ib.depth", "ib.rndv", "ib.wait"
)

// Options documents the options ParseParams reads.
var Options = &transports.OptionSet{Name: "ib", Options: []transports.Option{
	{Key: KeyDev, Type: "text", Default: "", Help: "RDMA device (ibv_devinfo's hca_id); empty: the first device with an active port whose GID's netdev and address are in this process's network namespace (RoCE devices are visible from every namespace but move data only through their own netdev), else the first device with an active port"},
	{Key: KeyPort, Type: "int", Default: "0", Help: "port number; 0: the device's first active port"},
	{Key: KeyGID, Type: "int", Default: "-1", Help: "GID index; -1: the one discovery chooses (gotune doctor shows it: RoCE v2 with an IPv4 address first; index 0 on InfiniBand)"},
	{Key: KeyMTU, Type: "256|512|1024|2048|4096|0", Default: "0", Help: "path MTU in bytes; 0: the port's active MTU (the lower of both ends')"},
	msgengine.EagerOption("ib", "8K", "larger messages go by rendezvous (ib.rndv) straight between registered user buffers"),
	{Key: KeyCredits, Type: "int", Default: fmt.Sprint(DefaultCredits), Help: "eager receive slots each rank keeps posted for each peer (ib.eager plus a 32-byte header each): a sender holds one credit per slot, returned piggybacked on messages or by an RDMA write of the count"},
	{Key: KeyDepth, Type: "int", Default: fmt.Sprint(DefaultDepth), Help: "send queue depth of each queue pair (sends, RDMA reads and writes outstanding); at least 2"},
	{Key: KeyRndv, Type: "read|write", Default: "read", Help: "rendezvous: read (the receiver RDMA-reads the sender's buffer, then says it is done) or write (the receiver answers clear-to-send with its buffer, the sender RDMA-writes it)"},
	{Key: KeyWait, Type: "poll|event", Default: "poll", Help: "completion: poll spins on the completion queue; event sleeps on its completion channel after a short spin"},
}}

// ParseParams reads ib.* options; errors name the key.
func ParseParams(o transports.Options) (Params, error) {
	p := Params{Dev: o[KeyDev]}
	var err error
	if p.Port, err = o.Int(KeyPort, 0); err != nil {
		return p, err
	}
	p.GID = -1
	if v, ok := o[KeyGID]; ok {
		if p.GID, err = strconv.Atoi(v); err != nil {
			return p, fmt.Errorf("option ib.gid=%q: want an index, or -1 for the one discovery chooses", v)
		}
	}
	if p.MTU, err = o.Int(KeyMTU, 0); err != nil {
		return p, err
	}
	if p.Eager, err = o.Int(KeyEager, DefaultEager); err != nil {
		return p, err
	}
	if p.Credits, err = o.Int(KeyCredits, DefaultCredits); err != nil {
		return p, err
	}
	if p.Depth, err = o.Int(KeyDepth, DefaultDepth); err != nil {
		return p, err
	}
	if p.Rndv, err = o.String(KeyRndv, "read", "read", "write"); err != nil {
		return p, err
	}
	if p.Wait, err = o.String(KeyWait, "poll", "poll", "event"); err != nil {
		return p, err
	}
	switch {
	case p.Port < 0 || p.Port > 255:
		return p, fmt.Errorf("option ib.port=%d: want 0 (the first active port) to 255", p.Port)
	case p.GID < -1:
		return p, fmt.Errorf("option ib.gid=%d: want -1 (chosen) or an index", p.GID)
	case p.Eager < 0 || p.Eager > 1<<20:
		return p, fmt.Errorf("option ib.eager=%d: want 0 to 1M", p.Eager)
	case p.Credits < 1 || p.Credits > 4096:
		return p, fmt.Errorf("option ib.credits=%d: want 1 to 4096", p.Credits)
	case p.Depth < 2 || p.Depth > 1<<15:
		return p, fmt.Errorf("option ib.depth=%d: want 2 to 32768", p.Depth)
	}
	if p.MTU != 0 {
		if _, err := verbs.MTUOf(p.MTU); err != nil {
			return p, fmt.Errorf("option ib.mtu: %w", err)
		}
	}
	return p, nil
}

// Options renders p as the options ParseParams reads back into p. Every key
// is written, so the result means the same to a build whose defaults differ.
func (p Params) Options() transports.Options {
	itoa := strconv.Itoa
	return transports.Options{KeyDev: p.Dev, KeyPort: itoa(p.Port), KeyGID: itoa(p.GID), KeyMTU: itoa(p.MTU),
		KeyEager: itoa(p.Eager), KeyCredits: itoa(p.Credits), KeyDepth: itoa(p.Depth), KeyRndv: p.Rndv, KeyWait: p.Wait}
}
