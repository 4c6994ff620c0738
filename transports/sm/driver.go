package sm

import "github.com/gotune/gotune/transports"

func init() {
	transports.Register(&transports.Driver{
		Name:        "sm",
		NodeLocal:   true,
		Options:     []*transports.OptionSet{Options},
		SharedBytes: SharedBytes,
		New: func(env transports.Env) (transports.Transport, error) {
			p, err := ParseParams(env.Options)
			if err != nil {
				return nil, err
			}
			return New(env, p, nil, "sm")
		},
		Check: func(transports.Transport, transports.Env) error { return nil },
	})
}

// SharedBytes is the shared segment a job of the sm engine needs for
// messages up to size under options o; every driver built on the engine
// (cma, knem, xpmem) declares it as its own.
func SharedBytes(size int, o transports.Options) (int, error) {
	p, err := ParseParams(o)
	if err != nil {
		return 0, err
	}
	return p.JobBytes(size)
}
