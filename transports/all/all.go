// Package all links every transport into the registry.
package all

import (
	_ "github.com/gotune/gotune/transports/auto"
	_ "github.com/gotune/gotune/transports/cma"
	_ "github.com/gotune/gotune/transports/cudaipc"
	_ "github.com/gotune/gotune/transports/ib"
	_ "github.com/gotune/gotune/transports/knem"
	_ "github.com/gotune/gotune/transports/sm"
	_ "github.com/gotune/gotune/transports/tcp"
	_ "github.com/gotune/gotune/transports/xpmem"
)
