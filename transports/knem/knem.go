package knem

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// Params configure the transport.
type Params struct {
	Pull      bool   // receiver copies from the sender's region (true) or the sender into the receiver's
	Threshold int    // smallest message sent by single copy
	Cached    bool   // regions kept for reuse (else single-use, one per message)
	Cache     int    // regions kept when Cached, least recently used destroyed first
	DMA       string // off, auto (when the driver reports a DMA engine) or on
	Device    string // the device node, or "fake"
}

// Option keys.
const (
	KeyMode      = "knem.mode"
	KeyThreshold = "knem.threshold"
	KeyRegions   = "knem.regions"
	KeyCache     = "knem.cache"
	KeyDMA       = "knem.dma"
	KeyDevice    = "knem.device"
)

// Fake is the knem.device value that selects the test stand-in.
const Fake = "fake"

// DefaultCache is the built-in knem.cache.
const DefaultCache = 64

// Options documents the options ParseParams reads (besides sm.*).
var Options = &transports.OptionSet{Name: "knem", Options: []transports.Option{
	{Key: KeyMode, Type: "pull|push", Default: "pull", Help: "pull (the sender declares its buffer a read-only region, the receiver copies from it) or push (the receiver declares a writable region, the sender copies into it)"},
	{Key: KeyThreshold, Type: "size", Help: "smallest message sent by single copy (default: sm.eager+1)"},
	{Key: KeyRegions, Type: "single|cached", Default: "single", Help: "single (a single-use region per message, gone after the peer's copy) or cached (regions kept per buffer and reused; the allocator's release hook must reach the transport, as gotune bench's does)"},
	{Key: KeyCache, Type: "int", Default: fmt.Sprint(DefaultCache), Help: "regions kept with knem.regions=cached, least recently used destroyed first"},
	{Key: KeyDMA, Type: "off|auto|on", Default: "off", Help: "offload copies onto the DMA engine: auto where the driver reports one, on requires it"},
	{Key: KeyDevice, Type: "path", Default: sys.KnemDevice, Help: "the KNEM device node; fake: a stand-in for tests that copies with process_vm_readv/writev (no module needed)"},
}}

// ParseParams reads knem.* options; eagerLimit is the sm eager limit in force.
func ParseParams(o transports.Options, eagerLimit int) (Params, error) {
	mode, err := o.String(KeyMode, "pull", "pull", "push")
	if err != nil {
		return Params{}, err
	}
	p := Params{Pull: mode == "pull", Device: sys.KnemDevice}
	if p.Threshold, err = o.Int(KeyThreshold, eagerLimit+1); err != nil {
		return p, err
	}
	if p.Threshold <= eagerLimit {
		return p, fmt.Errorf("%s=%d: must exceed the eager limit %d", KeyThreshold, p.Threshold, eagerLimit)
	}
	regions, err := o.String(KeyRegions, "single", "single", "cached")
	if err != nil {
		return p, err
	}
	p.Cached = regions == "cached"
	if p.Cache, err = o.Int(KeyCache, DefaultCache); err != nil {
		return p, err
	}
	if p.Cache < 1 {
		return p, fmt.Errorf("%s=%d: need at least 1", KeyCache, p.Cache)
	}
	if p.DMA, err = o.String(KeyDMA, "off", "off", "auto", "on"); err != nil {
		return p, err
	}
	if v, ok := o[KeyDevice]; ok {
		if v == "" {
			return p, fmt.Errorf("option %s: empty", KeyDevice)
		}
		p.Device = v
	}
	return p, nil
}

// Options renders p as the options ParseParams reads back into p (given
// the eager limit p.Threshold was read with). Every key is written, so the
// result means the same to a build whose defaults differ.
func (p Params) Options() transports.Options {
	return transports.Options{KeyMode: transports.Choice(p.Pull, "pull", "push"), KeyThreshold: strconv.Itoa(p.Threshold),
		KeyRegions: transports.Choice(p.Cached, "cached", "single"), KeyCache: strconv.Itoa(p.Cache), KeyDMA: p.DMA, KeyDevice: p.Device}
}

// params reads the sm engine's options and knem's own from o.
func params(o transports.Options) (sm.Params, Params, error) {
	sp, err := sm.ParseParams(o)
	if err != nil {
		return sp, Params{}, err
	}
	p, err := ParseParams(o, sp.EagerLimit)
	return sp, p, err
}

// Info is what the device said when it was opened.
type Info struct {
	sys.KnemInfo
	Device string // the node, or "fake"
}

// DMA says whether the driver can offload copies to a DMA engine.
func (i Info) DMA() bool { return i.Features&sys.KnemFeatureDMA != 0 }

func (i Info) String() string {
	dma := "no DMA engine"
	if i.DMA() {
		dma = "DMA engine"
	}
	return fmt.Sprintf("%s: ABI %#x, features %#x (%s)", i.Device, i.ABI, i.Features, dma)
}

// open returns the device p names, its ABI checked: the module's, or the fake.
func open(p Params) (device, Info, error) {
	var d device
	if p.Device == Fake {
		f, err := openFake()
		if err != nil {
			return nil, Info{}, err
		}
		d = f
	} else {
		k, err := sys.OpenKnem(p.Device)
		if err != nil {
			return nil, Info{}, err
		}
		d = realDevice{k}
	}
	ki, err := d.Info()
	info := Info{KnemInfo: ki, Device: p.Device}
	if err == nil {
		err = checkInfo(info, p.DMA)
	}
	if err != nil {
		d.Close()
		return nil, info, err
	}
	return d, info, nil
}

// checkInfo says whether gotune can use a driver that answered info:
// its ABI, and a DMA engine when knem.dma=on demands one.
func checkInfo(info Info, dma string) error {
	switch {
	case info.ABI != sys.KnemABI:
		return sys.NotSupported("knem", fmt.Sprintf("ABI %#x unsupported (gotune speaks ABI %#x, knem 1.1.x)", info.ABI, sys.KnemABI), nil)
	case dma == "on" && !info.DMA():
		return sys.NotSupported("knem.dma=on", fmt.Sprintf("the driver reports no DMA engine (features %#x)", info.Features), nil)
	}
	return nil
}

// Probe opens the device o names (default /dev/knem) and says what it
// found: what doctor and selftest report. Absence, an unsupported ABI and
// a node this user may not open match ErrNotSupported.
func Probe(o transports.Options) (Info, error) {
	p, err := ParseParams(o, 0)
	if err != nil {
		return Info{}, err
	}
	d, info, err := open(p)
	if err != nil {
		return info, err
	}
	return info, d.Close()
}

func init() {
	transports.Register(&transports.Driver{
		Name:        "knem",
		NodeLocal:   true,
		Options:     []*transports.OptionSet{sm.Options, Options},
		SharedBytes: sm.SharedBytes,
		New:         func(env transports.Env) (transports.Transport, error) { return New(env) },
		Check:       Check,
		Present: func(o transports.Options) error {
			_, err := Probe(o)
			return err
		},
	})
	sm.RegisterMechanism("knem", sm.Mechanism{
		Routed: func(env transports.Env, route func(int) bool) (sm.SingleCopy, error) {
			_, p, err := params(env.Options)
			if err != nil {
				return nil, err
			}
			return NewCopier(p, route)
		},
		Check: Check,
	})
}

// Transport is the sm engine with KNEM rendezvous. It implements
// transports.Invalidator: with knem.regions=cached, hook Invalidate to the
// allocator of the buffers it sends from and receives into.
type Transport struct {
	*sm.Endpoint
	c *Copier
}

// New builds the knem transport for env.
func New(env transports.Env) (*Transport, error) {
	sp, p, err := params(env.Options)
	if err != nil {
		return nil, err
	}
	if env.MultiHost() {
		return nil, sys.NotSupported("knem", "ranks on more than one host", nil)
	}
	c, err := NewCopier(p, nil)
	if err != nil {
		return nil, err
	}
	ep, err := sm.New(env, sp, c, "knem")
	if err != nil {
		c.Close()
		return nil, err
	}
	return &Transport{Endpoint: ep, c: c}, nil
}

// Close closes the engine, then the device (the driver destroys what
// regions are left).
func (t *Transport) Close() error { return errors.Join(t.Endpoint.Close(), t.c.Close()) }

// Invalidate is the allocator's release hook: [addr, addr+n) is going back
// to the kernel, so no cached region may keep its pages.
func (t *Transport) Invalidate(addr uintptr, n int) { t.c.Invalidate(addr, n) }

// Info is what the device said when the transport opened it.
func (t *Transport) Info() Info { return t.c.info }

// Stats returns the copier's counters.
func (t *Transport) Stats() Stats { return t.c.Stats() }

// Check proves, between live ranks, that each can copy from the next
// through KNEM: every rank declares a marker a read-only region and sends
// its cookie to the next rank, which copies the marker through it.
func Check(tr transports.Transport, env transports.Env) error {
	if env.Size < 2 {
		return nil
	}
	_, p, err := params(env.Options)
	if err != nil {
		return err
	}
	// A device of its own: the transport may be auto's, whose copier is
	// not at hand.
	c, err := NewCopier(p, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	publish := func(marker []byte) (uint64, func(), error) {
		cookie, err := c.dev.CreateRegion(sys.AddressOf(marker), len(marker), false, 0)
		if err != nil {
			return 0, nil, err
		}
		return cookie, func() { c.dev.DestroyRegion(cookie) }, nil
	}
	return sm.RingCheck(tr, env, "knem", publish, func(prev int, cookie uint64, got []byte) error {
		err := c.dev.InlineCopy(env.PIDs[prev], got, cookie, 0, false, c.flags)
		if errors.Is(err, syscall.EPERM) {
			err = sys.NotSupported("knem copy from rank "+fmt.Sprint(prev), "the driver refused (another user's region)", err)
		}
		return err
	})
}
