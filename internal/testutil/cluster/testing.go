package cluster

import (
	"context"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

// Hosts is Up for a test: n namespace-hosts, removed when the test ends.
// It skips the test (fails it where GOTUNE_REQUIRE names "netns") where
// namespaces cannot be made, and fails it if making them fails.
func Hosts(t testing.TB, n int) *Cluster {
	t.Helper()
	testutil.SkipUnless(t, "netns", Available())
	c, err := Up(context.Background(), Config{Hosts: n, Slot: -1})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Release(t, c.Down)
	return c
}

// StartSlurm is Cluster.StartSlurm for a test, stopped when the test ends
// (before the hosts go, if Hosts came first). It skips the test (fails it
// where GOTUNE_REQUIRE names "slurm") where Slurm's or munge's programs
// are missing.
func StartSlurm(t testing.TB, c *Cluster) *Slurm {
	t.Helper()
	testutil.SkipUnless(t, "slurm", SlurmAvailable())
	s, err := c.StartSlurm(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	testutil.Release(t, c.StopSlurm)
	return s
}
