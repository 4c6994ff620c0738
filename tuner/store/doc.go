// Package store is the tuner's append-only record of what it measured and
// decided: JSON lines, one record per line, each written with a single
// write and synced before the next trial starts. A sweep killed at any
// moment loses at most the record being written; reopening the file drops
// that torn final line and resumes, and every record already there is
// found by its key, so nothing finished is measured again.
//
// A store checked in as data of record is compressed: path.gz (gzip -9n
// path) holds its records and path is gone. Open reads path.gz and then
// path, and appends to path, so a compressed store still resumes and
// stays append-only: the compressed part is never rewritten.
package store
