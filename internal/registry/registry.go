package registry

import (
	"slices"
	"sync"
)

// Registry maps names to values; it is safe for concurrent use.
type Registry[T any] struct {
	dup string // the duplicate panic's message, before the name
	mu  sync.RWMutex
	m   map[string]T
}

// New returns an empty registry whose Register panics with dup followed
// by the name when that name is taken.
func New[T any](dup string) *Registry[T] {
	return &Registry[T]{dup: dup, m: map[string]T{}}
}

// Register adds v as name; it panics on a duplicate, which is a
// programming error (two packages claiming one name at init).
func (r *Registry[T]) Register(name string, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, taken := r.m[name]; taken {
		panic(r.dup + name)
	}
	r.m[name] = v
}

// Lookup finds name's value.
func (r *Registry[T]) Lookup(name string) (T, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.m[name]
	return v, ok
}

// Names lists the registered names, sorted.
func (r *Registry[T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.m))
	for n := range r.m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
