package profile

import (
	"bytes"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// mismatch finds the hash Load computed in its hash-mismatch error.
var mismatch = regexp.MustCompile(`hash: (sha256:[0-9a-f]{64}) does not match the content \((sha256:[0-9a-f]{64})\)`)

// FuzzLoad: Load never panics, names the file in every error line, and any
// profile it accepts encodes to a file that loads to an equal profile.
// Inputs refused only for their hash are re-sealed and tried again, so that
// the fuzzer reaches past the hash into what the content may hold.
func FuzzLoad(f *testing.F) {
	g := string(goldenBytes(f))
	f.Add([]byte(g))
	for _, c := range brokenCases() {
		f.Add([]byte(c.data(f, g)))
	}
	// Other valid shapes: flow style, quoted keys and values, empty lists.
	f.Add([]byte(edit(f, g, "allocator:\n  cache_bytes: 67108864\n  purge: delayed\n  thp: true\n",
		"allocator: {thp: true, purge: delayed, cache_bytes: 67108864} # flow\n")))
	f.Add([]byte(sealed(f, func(p *Profile) {
		p.Safety = nil
		p.Libraries = map[string]string{"0": "null", "y": "1.0", "nccl-net": "  "}
		p.Scope = Scope{Hosts: []string{"*"}}
		p.Fingerprint.Kernel = "line\nbreak\x00"
	})))
	f.Add([]byte(sealed(f, withStacks)))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parse("fuzz.yaml", data, nil)
		if err != nil {
			if m := mismatch.FindSubmatch([]byte(err.Error())); m != nil {
				data = bytes.Replace(data, m[1], m[2], 1)
				p, err = parse("fuzz.yaml", data, nil)
			}
		}
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "fuzz.yaml: ") {
					t.Fatalf("error line %q does not name the file", line)
				}
			}
			return
		}
		again := *p
		b, err := Encode(&again)
		if err != nil {
			t.Fatalf("accepted, but does not encode: %v", err)
		}
		if again.Hash != p.Hash {
			t.Fatalf("accepted with hash %s, encodes with %s", p.Hash, again.Hash)
		}
		q, err := parse("again.yaml", b, nil)
		if err != nil {
			t.Fatalf("accepted\n%s\nbut its encoding\n%s\ndoes not load: %v", data, b, err)
		}
		p.path, q.path = "", ""
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("accepted\n%#v\nreloaded as\n%#v", p, q)
		}
		if b2, err := Encode(q); err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("encodings differ (%v):\n%s\n%s", err, b, b2)
		}
	})
}
