// Package profile owns the profile format: the YAML file the tuner emits and
// the transports runtime loads. A profile says, for a set of hosts, which
// transport and protocol carries each message size per locality and memory
// pair, with the thresholds, FIFO and allocator settings that go with them,
// the evidence the decisions rest on, and the hazard verdicts they passed.
// A profile may also carry decisions for the MPI stacks and allocators gotune
// tunes through themselves (Stacks: Open MPI, MPICH, UCX, mimalloc), in each
// stack's own parameter names with the evidence per value; package
// profile/native renders them as the files those stacks read. The section is
// omitted when empty, so profiles without it keep their hashes.
//
// The package owns the types, the canonical encoding and its hash (Encode,
// Seal, Write), strict loading with GOTUNE_ environment overrides (Load,
// LoadEnv), semantic validation (Validate), routing a message size
// (Profile.Route), the scope check (Profile.Applies), the catalogue of
// profiles of record and the entry whose scope fits a host (Catalogue,
// Find), and comparing two profiles (Compare, Diff, Show). It does not decide anything (the tuner
// does) and does not configure transports (the selector does).
//
// # Canonical encoding and hash
//
// Encode writes the fields in struct order with map keys sorted, two-space
// indentation, and the hash last. The hash is "sha256:" and the hex SHA-256
// of the canonical encoding of the same profile with an empty hash. Load
// verifies it over the content it decoded, re-encoded canonically: comments,
// key order and whitespace may change, values may not. Because the hash is
// the last key, a file cut short loses it, and says so. The canonical bytes
// are go.yaml.in/yaml/v3's output; testdata/profile.yaml pins them, so an
// upgrade of that library that would change them (and so the hash of every
// checked-in profile) fails a test first.
//
// # Loading
//
// Load reads the file once and decodes it through viper, strictly: an
// unknown key, a value of the wrong type (no "4096" for an int, no 4096.5
// either), a key that is not lower-case letters, digits, '_' and '-' (viper
// would fold or split it), a duplicate key, an anchor or alias, a second
// YAML document, a wrong format version or a hash that does not match is an
// error naming the file and the key, one line per problem.
//
// Then environment variables override scalar keys: the key upper-cased, '.'
// and '-' replaced by '_', prefixed with GOTUNE_ (GOTUNE_ALLOCATOR_PURGE,
// GOTUNE_DECISIONS_INTRANODE_HOST_HOST_EAGER_LIMIT). Every scalar of the
// schema can be overridden except version and hash; map entries (libraries,
// decisions, and a stack's version, params and evidence:
// GOTUNE_STACKS_OPENMPI_PARAMS_BTL_VADER_EAGER_LIMIT) where the file has
// them, lists not at all. A value that does
// not parse as the key's type is an error naming the variable; empty values
// are ignored, as viper ignores them. The overrides applied are recorded in
// Profile.Overrides; the hash stays the file's. Validate runs last, on the
// overridden profile.
package profile
