// Package testutil holds helpers shared by gotune's tests.
package testutil

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// Required reports whether GOTUNE_REQUIRE (a comma-separated list, or "all")
// names capability: then a missing capability fails the test instead of
// skipping it. CI sets it for what its machine must have.
func Required(capability string) bool {
	req := strings.Split(os.Getenv("GOTUNE_REQUIRE"), ",")
	return slices.Contains(req, capability) || slices.Contains(req, "all")
}

// Release runs release when the test ends and fails the test on its error:
// the end of a resource a helper made for the test.
func Release(t testing.TB, release func() error) {
	t.Cleanup(func() {
		if err := release(); err != nil {
			t.Error(err)
		}
	})
}

// SkipUnless skips the test, with the reason, when a capability is missing
// (err != nil), or fails it when GOTUNE_REQUIRE names the capability.
func SkipUnless(t testing.TB, capability string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if Required(capability) {
		t.Fatalf("%s required by GOTUNE_REQUIRE but unavailable: %v", capability, err)
	}
	t.Skipf("%s unavailable: %v", capability, err)
}
