package stack

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/testutil"
)

// A candidate is one ucx.conf, UCX_NAME=value lines sorted, in a directory
// named by its content that UCX_CONFIG_DIR points at; the defaults get an
// empty one.
func TestUCXConfigDir(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]string
		want   string
	}{
		{"defaults", nil, ""},
		{"one", map[string]string{"tls": "sm,self"}, "UCX_TLS=sm,self\n"},
		{"sorted, mm names kept", map[string]string{"rndv_thresh": "32K", "mm_fifo_size": "256", "bcopy_thresh": "0"},
			"UCX_BCOPY_THRESH=0\nUCX_MM_FIFO_SIZE=256\nUCX_RNDV_THRESH=32K\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			env, err := configDir(dir, tc.params)
			if err != nil {
				t.Fatal(err)
			}
			cd, ok := strings.CutPrefix(env[0], "UCX_CONFIG_DIR=")
			if len(env) != 2 || !ok || filepath.Dir(cd) != dir || env[1] != "UCX_WARN_UNUSED_ENV_VARS=n" {
				t.Fatalf("env %v, want UCX_CONFIG_DIR=<a directory under %s> UCX_WARN_UNUSED_ENV_VARS=n", env, dir)
			}
			got, err := os.ReadFile(filepath.Join(cd, "ucx.conf"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("ucx.conf %q, want %q", got, tc.want)
			}
			again, err := configDir(dir, tc.params)
			if err != nil || !slices.Equal(again, env) {
				t.Errorf("the same values again: %v, %v; want %v", again, err, env)
			}
		})
	}
}

// UCX reads the candidate file: ucx_info -c, with the environment a
// contender runs under, reports every value of the space's candidates.
func TestUCXConfigDirRead(t *testing.T) {
	_, err := exec.LookPath("ucx_info")
	testutil.SkipUnless(t, "ucx", err)
	params := map[string]string{}
	for _, p := range (&UCX{}).Space() {
		params[p.Name] = p.Values[len(p.Values)-1]
	}
	env, err := configDir(t.TempDir(), params)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), "ucx_info", "-c")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ucx_info -c: %v", err)
	}
	lines := strings.Split(string(out), "\n")
	for name, v := range params {
		want := ucxVar(name) + "=" + v
		if rest, ok := strings.CutPrefix(name, "mm_"); ok {
			want = ucxVar("posix_"+rest) + "=" + v // UCX reports what UCX_MM_X sets
		}
		if !slices.Contains(lines, want) {
			t.Errorf("ucx_info -c with %s has no line %s", env[0], want)
		}
	}
}

// Prepare refuses to tune where the environment or ./ucx.conf would beat
// every candidate file.
func TestUCXShadowed(t *testing.T) {
	space := []Param{{Name: "tls", Values: []string{"all", "sm,self"}, Pattern: bench.Bandwidth}, {Name: "mm_fifo_size", Values: []string{"64", "256"}}}
	dir := t.TempDir()
	local := filepath.Join(dir, "ucx.conf")
	for _, tc := range []struct {
		name  string
		env   map[string]string
		local bool
		want  string // in the error; "" for none
	}{
		{"clean", map[string]string{"UCX_NET_DEVICES": "lo"}, false, ""},
		{"a parameter in the environment", map[string]string{"UCX_TLS": "tcp"}, false, "UCX_TLS=tcp in the environment"},
		{"what UCX_MM_ sets", map[string]string{"UCX_POSIX_FIFO_SIZE": "8"}, false, "UCX_POSIX_FIFO_SIZE=8"},
		{"./ucx.conf", nil, true, local + " is read after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(local)
			if tc.local {
				if err := os.WriteFile(local, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			err := shadowed(space, lookup, local)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("shadowed: %v, want %q", err, tc.want)
			}
		})
	}
}
