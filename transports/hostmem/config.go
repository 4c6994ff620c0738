package hostmem

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gotune/gotune/transports"
)

// Purge says when a cached buffer's pages go back to the kernel.
type Purge int

const (
	// Immediate purges a buffer as it enters the cache.
	Immediate Purge = iota
	// Delayed purges a cached buffer once Config.DelayFrees further frees
	// have happened, unless it was reused meanwhile.
	Delayed
	// Never keeps cached buffers resident.
	Never
)

var purgeNames = [...]string{"immediate", "delayed", "never"}

func (p Purge) String() string {
	if p < 0 || int(p) >= len(purgeNames) {
		return fmt.Sprintf("purge(%d)", int(p))
	}
	return purgeNames[p]
}

// ParsePurge reads immediate, delayed or never.
func ParsePurge(s string) (Purge, error) {
	if i := slices.Index(purgeNames[:], s); i >= 0 {
		return Purge(i), nil
	}
	return 0, fmt.Errorf("purge policy %q: want one of %s", s, strings.Join(purgeNames[:], ", "))
}

// Config is the allocator's tuning.
type Config struct {
	CacheBytes int64 // freed buffers kept for reuse, at most this many bytes (by size class)
	Purge      Purge
	THP        bool // back classes of sys.HugePage and up with transparent huge pages
	DelayFrees int  // Delayed: frees a cached buffer waits before its purge
}

// DefaultConfig holds a bandwidth window of 64 messages of 4 MiB in the
// cache and purges what has not been reused within 64 frees.
func DefaultConfig() Config {
	return Config{CacheBytes: 256 << 20, Purge: Delayed, DelayFrees: 64}
}

// Option keys.
const (
	KeyCache   = "alloc.cache"
	KeyPurge   = "alloc.purge"
	KeyDelay   = "alloc.delay"
	KeyTHP     = "alloc.thp"
	KeyEntries = "regcache.entries"
)

// Options documents the options this package reads.
var Options = func() *transports.OptionSet {
	c := DefaultConfig()
	return &transports.OptionSet{Name: "alloc", Options: []transports.Option{
		{Key: KeyCache, Type: "size", Default: transports.FormatSize(int(c.CacheBytes)), Help: "host buffer cache size, by size class; when full, the least recently freed buffers are unmapped"},
		{Key: KeyPurge, Type: "immediate|delayed|never", Default: c.Purge.String(), Help: "when cached buffers' pages go back to the kernel (MADV_DONTNEED)"},
		{Key: KeyDelay, Type: "int", Default: fmt.Sprint(c.DelayFrees), Help: "alloc.purge=delayed: frees a cached buffer waits before its purge"},
		{Key: KeyTHP, Type: "on|off", Default: map[bool]string{true: "on", false: "off"}[c.THP], Help: "on: back buffer classes of 2 MiB and up with transparent huge pages; off: MADV_NOHUGEPAGE"},
		{Key: KeyEntries, Type: "heap|hooked", Default: "heap", Help: "registration cache table: heap (safe) or hooked (hazard H1's deliberate deadlock, for gotune probe H1 --unsafe)"},
	}}
}()

// ParseConfig reads the alloc.* options over DefaultConfig; errors name the key.
func ParseConfig(o transports.Options) (Config, error) {
	c := DefaultConfig()
	cache, err := o.Int(KeyCache, int(c.CacheBytes))
	if err != nil {
		return c, err
	}
	c.CacheBytes = int64(cache)
	purge, err := o.String(KeyPurge, c.Purge.String(), purgeNames[:]...)
	if err != nil {
		return c, err
	}
	if c.Purge, err = ParsePurge(purge); err != nil {
		return c, fmt.Errorf("option %s: %w", KeyPurge, err)
	}
	if c.DelayFrees, err = o.Int(KeyDelay, c.DelayFrees); err != nil {
		return c, err
	}
	thp, err := o.String(KeyTHP, "off", "on", "off")
	if err != nil {
		return c, err
	}
	c.THP = thp == "on"
	return c, c.Validate()
}

// Validate checks a configuration, naming the option at fault.
func (c Config) Validate() error {
	switch {
	case c.CacheBytes < 0:
		return fmt.Errorf("%s=%d: must not be negative", KeyCache, c.CacheBytes)
	case c.Purge < Immediate || c.Purge > Never:
		return fmt.Errorf("%s: unknown policy %d", KeyPurge, int(c.Purge))
	case c.Purge == Delayed && c.DelayFrees < 1:
		return fmt.Errorf("%s=%d: a delayed purge waits at least 1 free", KeyDelay, c.DelayFrees)
	case c.DelayFrees < 0:
		return fmt.Errorf("%s=%d: must not be negative", KeyDelay, c.DelayFrees)
	}
	return nil
}

// Options renders c as the options ParseConfig reads back.
func (c Config) Options() transports.Options {
	return transports.Options{
		KeyCache: transports.FormatSize(int(c.CacheBytes)), KeyPurge: c.Purge.String(),
		KeyDelay: fmt.Sprint(c.DelayFrees), KeyTHP: transports.Choice(c.THP, "on", "off"),
	}
}

// EntryStorage is where a RegCache keeps its table.
type EntryStorage int

const (
	// HeapEntries: the Go heap; hook invalidations are queued (safe).
	HeapEntries EntryStorage = iota
	// HookedEntries: memory from the hooked allocator, grown under the
	// cache lock, invalidated synchronously under it: hazard H1's shape.
	HookedEntries
)

func (s EntryStorage) String() string {
	if s == HookedEntries {
		return "hooked"
	}
	return "heap"
}

// ParseEntryStorage reads option regcache.entries (heap or hooked).
func ParseEntryStorage(o transports.Options) (EntryStorage, error) {
	v, err := o.String(KeyEntries, "heap", "heap", "hooked")
	if err != nil {
		return HeapEntries, err
	}
	if v == "hooked" {
		return HookedEntries, nil
	}
	return HeapEntries, nil
}

// SplitOptions separates this package's options (own) from the rest, so
// that alloc.* and regcache.* are accepted alongside any transport's keys.
// A key under those prefixes that this package does not know is an error.
// Values are checked too.
func SplitOptions(o transports.Options) (own, rest transports.Options, err error) {
	for _, k := range slices.Sorted(maps.Keys(o)) {
		known := Options.Has(k)
		mine := strings.HasPrefix(k, "alloc.") || strings.HasPrefix(k, "regcache.")
		switch {
		case known:
			if own == nil {
				own = transports.Options{}
			}
			own[k] = o[k]
		case mine:
			return nil, nil, fmt.Errorf("unknown allocator option %q (have %s)", k, strings.Join(Options.Keys(), ", "))
		default:
			if rest == nil {
				rest = transports.Options{}
			}
			rest[k] = o[k]
		}
	}
	if _, err := ParseConfig(own); err != nil {
		return nil, nil, err
	}
	if _, err := ParseEntryStorage(own); err != nil {
		return nil, nil, err
	}
	return own, rest, nil
}
