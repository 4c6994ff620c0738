package sm

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/gotune/gotune/transports"
)

// Option keys.
const (
	KeyDepth    = "sm.depth"
	KeyCell     = "sm.cell"
	KeyEager    = "sm.eager"
	KeyFrag     = "sm.frag"
	KeyFrags    = "sm.frags"
	KeyCopy     = "sm.copy"
	KeyStream   = "sm.stream"
	KeyWrap     = "sm.wrap"
	KeyStreams  = "sm.streams"
	KeyPark     = "sm.park"
	KeyDrain    = "sm.drain"
	KeyProgress = "sm.progress"
	KeyPersist  = "sm.persist"
	KeyBudget   = "sm.budget"
)

// Options documents the options ParseParams reads.
var Options = func() *transports.OptionSet {
	d, size := DefaultParams(), transports.FormatSize
	return &transports.OptionSet{Name: "sm", Options: []transports.Option{
		{Key: KeyDepth, Type: "int|auto", Default: "auto", Help: "cells per channel (FIFO depth); auto: 64 up to 9 ranks, 32 up to 18, 16 above"},
		{Key: KeyCell, Type: "size", Default: size(d.CellSize), Help: "cell size in bytes, header included (multiple of 64); when sm.eager is set without it, the cell grows to fit the eager limit"},
		{Key: KeyEager, Type: "size", Default: size(d.EagerLimit), Help: "eager limit: largest message sent inline in one cell"},
		{Key: KeyFrag, Type: "size", Default: size(d.FragSize), Help: "fragment size for pipelined messages (multiple of 64)"},
		{Key: KeyFrags, Type: "int", Default: size(d.FragSlots), Help: "fragment ring size, in largest fragments (ring bytes = sm.frag x sm.frags)"},
		{Key: KeyCopy, Type: "auto|go|movsb", Default: d.Copy, Help: "fragment copy routine (eager cells always use Go's copy): go (vector loop), movsb (REP MOVSB), or auto (movsb from 64 KiB, and into the ring at 8-16 KiB too, and at 17-63 KiB while the sender's timed copies show a slow spell)"},
		{Key: KeyStream, Type: "size", Default: size(d.StreamMin), Help: "message size from which a message arriving alone (not taking turns with others) is copied out with streaming stores (0: never)"},
		{Key: KeyWrap, Type: "size", Default: size(d.Wrap), Help: "bytes at the ring's start that large fragments (at least min(sm.frag, 64 KiB)) cycle through (0: the whole ring; also when sm.frag exceeds the built-in wrap and sm.wrap is unset)"},
		{Key: KeyStreams, Type: "int", Default: size(d.Streams), Help: "pipelined sends to one peer that advance together, one fragment each in turn (1: one message at a time)"},
		{Key: KeyPark, Type: "duration", Default: transports.FormatDuration(d.Park), Help: "how long a message no posted receive awaits stays in its ring while nothing else moves, before it is copied to the unexpected queue (0: at once); a peer blocked on a full ring waits up to this long"},
		{Key: KeyDrain, Type: "always|never", Default: "always", Help: "always (a blocked send keeps draining incoming channels) or never (UNSAFE: hazard H5's deadlock, for probes only)"},
		{Key: KeyProgress, Type: "poll|thread", Default: d.Progress, Help: "poll (channels advance inside engine calls only) or thread (a progress thread also advances them while the application computes)"},
		{Key: KeyBudget, Type: "size", Default: "0", Help: "the most shared memory a job's channels may take (a cell FIFO per ordered pair of ranks, a fragment ring per rank); a job that needs more fails to start (0: 1/32 of the node's memory)"},
		{Key: KeyPersist, Type: "return|leak", Default: "return", Help: "return (freeing a persistent send returns its FIFO credit) or leak (UNSAFE: hazard H3's credit leak, for probes only)"},
	}}
}()

// Channel is the part of Params a profile decides; an empty Copy or
// Progress keeps the built-in one.
type Channel struct {
	Depth, CellSize, EagerLimit, FragSize, FragSlots int
	DepthRanks                                       int // see Params.DepthRanks
	Copy, Progress                                   string
	Park                                             string // sm.park's duration ("50us"); empty: the built-in
}

// ChannelParams returns the built-in parameters with c set over them,
// derived and checked as ParseParams does when given c as sm.* options:
// the runtime takes a profile's typed decision without a detour through
// option strings.
func ChannelParams(c Channel) (Params, error) {
	p := DefaultParams()
	p.Depth, p.CellSize, p.EagerLimit, p.FragSize, p.FragSlots = c.Depth, c.CellSize, c.EagerLimit, c.FragSize, c.FragSlots
	p.AutoDepth, p.DepthRanks = false, c.DepthRanks
	p.Copy, p.Progress = cmp.Or(c.Copy, p.Copy), cmp.Or(c.Progress, p.Progress)
	if c.Park != "" {
		var err error
		if p.Park, err = (transports.Options{KeyPark: c.Park}).Duration(KeyPark, p.Park); err != nil {
			return p, err
		}
	}
	if p.Wrap < p.FragSize {
		p.Wrap = 0 // the built-in wrap is below these fragments: the whole ring
	}
	return p, p.Validate()
}

// optionValues are the values an enumerated option allows, from Options.
func optionValues(key string) []string {
	for _, o := range Options.Options {
		if o.Key == key {
			return strings.Split(o.Type, "|")
		}
	}
	panic("sm: no option " + key)
}

// ParseParams reads sm.* options over the defaults and checks them. When
// sm.eager is given without sm.cell, the cell grows to fit it.
func ParseParams(o transports.Options) (Params, error) {
	p := DefaultParams()
	var err error
	if o[KeyDepth] != "auto" {
		if p.Depth, err = o.Int(KeyDepth, p.Depth); err != nil {
			return p, err
		}
		_, set := o[KeyDepth]
		p.AutoDepth = !set
	}
	if p.EagerLimit, err = o.Int(KeyEager, p.EagerLimit); err != nil {
		return p, err
	}
	if p.CellSize, err = o.Int(KeyCell, CellFor(p.EagerLimit)); err != nil {
		return p, err
	}
	if _, set := o[KeyEager]; !set && p.EagerLimit > p.CellSize-headerSize {
		p.EagerLimit = p.CellSize - headerSize
	}
	if p.FragSize, err = o.Int(KeyFrag, p.FragSize); err != nil {
		return p, err
	}
	if p.FragSlots, err = o.Int(KeyFrags, p.FragSlots); err != nil {
		return p, err
	}
	if p.Copy, err = o.String(KeyCopy, p.Copy, optionValues(KeyCopy)...); err != nil {
		return p, err
	}
	if p.StreamMin, err = o.Int(KeyStream, p.StreamMin); err != nil {
		return p, err
	}
	if p.Wrap, err = o.Int(KeyWrap, p.Wrap); err != nil {
		return p, err
	}
	if _, set := o[KeyWrap]; !set && p.Wrap < p.FragSize {
		p.Wrap = 0 // the built-in wrap is below these fragments: the whole ring
	}
	if p.Streams, err = o.Int(KeyStreams, p.Streams); err != nil {
		return p, err
	}
	if p.Park, err = o.Duration(KeyPark, p.Park); err != nil {
		return p, err
	}
	drain, err := o.String(KeyDrain, "always", "always", "never")
	if err != nil {
		return p, err
	}
	p.NoDrainOnSend = drain == "never"
	if p.Progress, err = o.String(KeyProgress, p.Progress, optionValues(KeyProgress)...); err != nil {
		return p, err
	}
	persist, err := o.String(KeyPersist, "return", "return", "leak")
	if err != nil {
		return p, err
	}
	p.LeakPersistent = persist == "leak"
	if p.Budget, err = o.Int(KeyBudget, 0); err != nil {
		return p, err
	}
	return p, p.Validate()
}

// Validate checks the parameters for consistency.
func (p Params) Validate() error {
	switch {
	case p.Depth < 1:
		return fmt.Errorf("sm.depth=%d: need at least 1 cell", p.Depth)
	case p.CellSize < cacheLine || p.CellSize%cacheLine != 0:
		return fmt.Errorf("sm.cell=%d: need a positive multiple of %d", p.CellSize, cacheLine)
	case p.CellSize < headerSize+ctrlPayload:
		return fmt.Errorf("sm.cell=%d: too small for control messages", p.CellSize)
	case p.EagerLimit < 0 || p.EagerLimit > p.CellSize-headerSize:
		return fmt.Errorf("sm.eager=%d: must fit a cell (at most sm.cell-%d = %d)", p.EagerLimit, headerSize, p.CellSize-headerSize)
	case p.FragSize < cacheLine || p.FragSize%cacheLine != 0:
		return fmt.Errorf("sm.frag=%d: need a positive multiple of %d", p.FragSize, cacheLine)
	case p.FragSlots < 1:
		return fmt.Errorf("sm.frags=%d: the ring needs room for at least 1 fragment", p.FragSlots)
	case !knownCopyMode(p.Copy):
		return fmt.Errorf("sm.copy=%q: want auto, go or movsb", p.Copy)
	case p.Wrap != 0 && (p.Wrap < p.FragSize || p.Wrap%cacheLine != 0):
		return fmt.Errorf("sm.wrap=%d: want 0 (the whole ring) or a multiple of %d of at least sm.frag=%d", p.Wrap, cacheLine, p.FragSize)
	case p.Streams < 1:
		return fmt.Errorf("sm.streams=%d: want at least 1 (one message at a time)", p.Streams)
	case p.StreamMin < 0:
		return fmt.Errorf("sm.stream=%d: want 0 (never) or a message size", p.StreamMin)
	case p.Park < 0:
		return fmt.Errorf("sm.park=%v: want 0 (at once) or a positive duration", p.Park)
	case p.Budget < 0:
		return fmt.Errorf("sm.budget=%d: want a size (0: the built-in share of the node's memory)", p.Budget)
	case p.Progress != "" && p.Progress != "poll" && p.Progress != "thread":
		return fmt.Errorf("sm.progress=%q: want poll or thread", p.Progress)
	}
	return nil
}

// Options renders p as the options ParseParams reads back into p. Every key
// is written, so the result means the same to a build whose defaults
// differ (sm.depth as auto with AutoDepth); an empty Progress is written
// as poll, which it means.
func (p Params) Options() transports.Options {
	itoa := strconv.Itoa
	o := transports.Options{
		KeyDepth: itoa(p.Depth), KeyCell: itoa(p.CellSize), KeyEager: itoa(p.EagerLimit),
		KeyFrag: itoa(p.FragSize), KeyFrags: itoa(p.FragSlots), KeyCopy: p.Copy,
		KeyStream: itoa(p.StreamMin), KeyWrap: itoa(p.Wrap), KeyStreams: itoa(p.Streams), KeyPark: transports.FormatDuration(p.Park),
		KeyDrain: transports.Choice(p.NoDrainOnSend, "never", "always"), KeyProgress: cmp.Or(p.Progress, "poll"),
		KeyPersist: transports.Choice(p.LeakPersistent, "leak", "return"),
	}
	if p.AutoDepth {
		o[KeyDepth] = "auto"
	}
	return o
}
