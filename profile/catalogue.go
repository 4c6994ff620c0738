package profile

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// A catalogue is a folder of profiles of record, one subfolder per kind of
// node measured (vm, cpu-h200, ... under DefaultCatalogue),
// each holding the profile.yaml a sweep emitted there and the evidence it
// was decided from. Users check profiles in this way and find the one that
// fits a host by its scope (Find).

// CatalogueEnv names the catalogue folder when set; else DefaultCatalogue.
const CatalogueEnv = "GOTUNE_CATALOGUE"

// DefaultCatalogue is the catalogue's folder, relative to the repository
// root (or wherever gotune runs).
const DefaultCatalogue = "results/catalogue"

// CatalogueDir is the catalogue folder this process uses: $GOTUNE_CATALOGUE
// or DefaultCatalogue.
func CatalogueDir() string {
	if d := os.Getenv(CatalogueEnv); d != "" {
		return d
	}
	return DefaultCatalogue
}

// Entry is one catalogue folder and its profile.
type Entry struct {
	Name    string // the folder's name: the kind of node
	Path    string // its profile.yaml
	Profile *Profile
}

// Catalogue loads every entry of dir (a subfolder holding profile.yaml),
// in name order. An entry whose profile does not load is an error naming
// its file: a catalogue is checked in, and a broken entry must not be
// skipped silently.
func Catalogue(dir string) ([]Entry, error) {
	subs, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("catalogue %s: %w", dir, err)
	}
	var out []Entry
	for _, d := range subs {
		if !d.IsDir() {
			continue
		}
		path := filepath.Join(dir, d.Name(), "profile.yaml")
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		p, err := Load(path)
		if err != nil {
			return nil, fmt.Errorf("catalogue entry %s: %w", d.Name(), err)
		}
		out = append(out, Entry{Name: d.Name(), Path: path, Profile: p})
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// Host is what a profile's scope is matched against.
type Host struct {
	Name     string
	CPUModel string
	Cores    int
}

// Find returns the entries whose profile applies to host (Profile.Applies),
// in catalogue order, and for every other entry why not ("vm: CPU model
// ... is not scope.cpu_model ..."). Where several apply (a node's host
// sweep and its GPU sweep), the first is the one to use: name entries so.
func Find(entries []Entry, host Host) (found []Entry, why []string) {
	for _, e := range entries {
		if err := e.Profile.Applies(host.Name, host.CPUModel, host.Cores); err != nil {
			why = append(why, fmt.Sprintf("%s: %v", e.Name, err))
			continue
		}
		found = append(found, e)
	}
	return found, why
}
