package sm

import "github.com/gotune/gotune/transports"

func init() {
	transports.Register(&transports.Driver{
		Name:      "sm",
		NodeLocal: true,
		Options:   []*transports.OptionSet{Options},
		SharedBytes: func(size int, o transports.Options) (int, error) {
			p, err := ParseParams(o)
			if err != nil {
				return 0, err
			}
			return p.SegmentBytes(size), nil
		},
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
