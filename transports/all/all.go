// Package all links every transport into the registry and lists every
// option set a user can pass.
package all

import (
	"slices"
	"strings"

	"github.com/gotune/gotune/transports"
	_ "github.com/gotune/gotune/transports/auto"
	_ "github.com/gotune/gotune/transports/cma"
	_ "github.com/gotune/gotune/transports/cudaipc"
	"github.com/gotune/gotune/transports/hostmem"
	_ "github.com/gotune/gotune/transports/ib"
	_ "github.com/gotune/gotune/transports/knem"
	_ "github.com/gotune/gotune/transports/nccl"
	_ "github.com/gotune/gotune/transports/sm"
	_ "github.com/gotune/gotune/transports/tcp"
	_ "github.com/gotune/gotune/transports/xpmem"
)

// OptionSets are every option set a user can pass with --opt, sorted by
// name: the registered drivers' (each once) and the host allocator's, which
// every transport accepts.
func OptionSets() []*transports.OptionSet {
	var sets []*transports.OptionSet
	seen := map[string]bool{}
	for _, name := range transports.Names() {
		d, err := transports.Lookup(name)
		if err != nil {
			continue
		}
		for _, s := range append(slices.Clone(d.Options), hostmem.Options) {
			if !seen[s.Name] {
				seen[s.Name] = true
				sets = append(sets, s)
			}
		}
	}
	slices.SortStableFunc(sets, func(a, b *transports.OptionSet) int { return strings.Compare(a.Name, b.Name) })
	return sets
}
