package main

import (
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/knem"
)

// knem plugs into selftest (and doctor's line for it): the driver's ABI
// and features, or why it is absent.
func init() {
	selftestModules["knem"] = func(o transports.Options) (string, error) {
		info, err := knem.Probe(o)
		if err != nil {
			return "", err
		}
		return "knem module " + info.String(), nil
	}
}
