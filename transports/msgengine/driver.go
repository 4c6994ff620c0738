package msgengine

import (
	"fmt"
	"strings"

	"github.com/gotune/gotune/transports"
)

// Driver is the registry entry of a network transport: it needs no shared
// segment (ranks exchange what they need through transports.Env.AllGather)
// and its options are checked by parse before any rank starts.
func Driver[P any](name string, opts *transports.OptionSet, parse func(transports.Options) (P, error),
	start func(transports.Env) (transports.Transport, error), check func(transports.Transport, transports.Env) error) *transports.Driver {
	return &transports.Driver{
		Name:    name,
		Options: []*transports.OptionSet{opts},
		SharedBytes: func(size int, o transports.Options) (int, error) {
			_, err := parse(o)
			return 0, err
		},
		New:   start,
		Check: check,
	}
}

// Check runs check on tr, which must be an X, when the job has more than
// one rank to check.
func Check[X any](name string, tr transports.Transport, env transports.Env, check func(X, transports.Env) error) error {
	if env.Size < 2 {
		return nil
	}
	x, ok := tr.(X)
	if !ok {
		article := "a"
		if strings.ContainsRune("aeiou", rune(name[0])) {
			article = "an"
		}
		return fmt.Errorf("%s check: not %s %s transport", name, article, name)
	}
	return check(x, env)
}

// EagerOption documents a transport's eager limit, name.eager: a size,
// def by default; help says what happens on either side of it.
func EagerOption(name, def, help string) transports.Option {
	return transports.Option{Key: name + ".eager", Type: "size", Default: def, Help: "eager limit: " + help}
}

// Ring sends out to the next rank of a ring and receives the previous
// rank's message into in, the check that every rank reaches its
// neighbours; it returns the previous rank.
func (e *Engine[T, R, A]) Ring(env transports.Env, out, in []byte) (prev int, err error) {
	next, prev := (env.Rank+1)%env.Size, (env.Rank+env.Size-1)%env.Size
	s, err := e.Isend(next, out)
	var r transports.Request
	if err == nil {
		r, err = e.Irecv(prev, in)
	}
	if err != nil {
		return prev, err
	}
	if err := e.Wait(s, r); err != nil {
		return prev, fmt.Errorf("%s check: %w", e.name, err)
	}
	return prev, nil
}
