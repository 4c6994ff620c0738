package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// selftest passes on the fake device (the whole path but the module) and
// fails, saying why, where the device is missing or the transport unknown.
func TestSelftest(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "xpmem")
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"fake", []string{"--opt", "xpmem.device=fake"}, 0, []string{
			"selftest xpmem: xpmem module version 0x26005 (fake)", "validated: 44 messages of 11 sizes",
			"invalidation: 48 messages in buffers purged right after use, validated; the transport's release hook ran for 96 buffers",
			"bandwidth: 4 x 1M rank 0 -> 1", "selftest xpmem: PASS"}},
		{"missing", []string{"--opt", "xpmem.device=" + missing}, 1, []string{"selftest xpmem: FAIL: xpmem: not supported: " + missing + " missing (the xpmem module is not loaded)"}},
		{"unknown", []string{"--transport", "cma"}, 1, []string{`selftest --transport "cma": want one of`}},
		{"bad option", []string{"--opt", "xpmem.cache=lots", "--opt", "xpmem.device=fake"}, 1, []string{`xpmem.cache="lots"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(append([]string{"selftest", "--bw-size", "1M", "--bw-iters", "4"}, c.args...), &out, &errb)
			all := out.String() + errb.String()
			if code != c.code {
				t.Errorf("exit %d, want %d:\n%s", code, c.code, all)
			}
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q:\n%s", w, all)
				}
			}
			t.Log(all)
		})
	}
}
