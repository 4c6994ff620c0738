package stack

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// constructors are the stacks gotune tunes and measures through themselves.
var constructors = map[string]func() Adapter{
	"openmpi":  func() Adapter { return &OpenMPI{} },
	"mpich":    func() Adapter { return &MPICH{} },
	"ucx":      func() Adapter { return &UCX{} },
	"mimalloc": func() Adapter { return &Mimalloc{} },
	"nccl":     func() Adapter { return &NCCL{} },
}

// Names lists the stacks New knows, sorted.
func Names() []string { return slices.Sorted(maps.Keys(constructors)) }

// New returns a fresh adapter for the named stack with its built-in space.
func New(name string) (Adapter, error) {
	c, ok := constructors[name]
	if !ok {
		return nil, fmt.Errorf("unknown stack %q (want %s)", name, strings.Join(Names(), ", "))
	}
	return c(), nil
}
