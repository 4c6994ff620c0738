// Package launchtest gives tests a cluster of launcher processes inside the
// test process (launch.InProcess): hosts are names, every rank is a real
// child process of the test binary.
package launchtest

import (
	"fmt"
	"testing"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/testutil"
)

// Cluster makes this process the coordinator on this host with one node
// agent per name in hosts, for the test's life. The test binary must call
// launch.MaybeRunRank in TestMain.
func Cluster(t testing.TB, hosts ...string) *launch.Cluster {
	t.Helper()
	c, wait, err := launch.InProcess(t.TempDir(), hosts...)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Release(t, func() error {
		if err := wait(); err != nil {
			return fmt.Errorf("node agent: %w", err)
		}
		return nil
	})
	return c
}
