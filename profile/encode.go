package profile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/gotune/gotune/internal/atomicfile"
)

const hashPrefix = "sha256:"

// canonical is the canonical encoding of p as it is, hash included: fields
// in struct order, map keys sorted (the YAML library sorts them), two-space
// indentation. Nil and empty maps and lists encode alike ({} and []).
func canonical(p *Profile) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("encoding profile: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding profile: %w", err)
	}
	return buf.Bytes(), nil
}

// hashOf is the hash p should carry: over its canonical encoding with an
// empty hash. p is not modified.
func hashOf(p *Profile) (string, error) {
	unsealed := *p
	unsealed.Hash = ""
	b, err := canonical(&unsealed)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hashPrefix + hex.EncodeToString(sum[:]), nil
}

// Seal sets p.Hash to the hash of p's content.
func Seal(p *Profile) error {
	h, err := hashOf(p)
	if err != nil {
		return err
	}
	p.Hash = h
	return nil
}

// Encode seals p (sets p.Hash) and returns its canonical encoding. It does
// not validate p: Write does.
func Encode(p *Profile) ([]byte, error) {
	if err := Seal(p); err != nil {
		return nil, err
	}
	return canonical(p)
}

// Write validates p, seals it and writes it to path atomically: a reader sees
// the old file or the new one, never a part.
func Write(path string, p *Profile) error {
	if err := Validate(p); err != nil {
		return fmt.Errorf("%s: not written: %w", path, err)
	}
	b, err := Encode(p)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := atomicfile.Write(path, b, 0o644); err != nil {
		return fmt.Errorf("writing profile %s: %w", path, err)
	}
	return nil
}
