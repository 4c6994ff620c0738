// Package registry owns the name-to-value tables that packages fill from
// init (job kinds, single-copy mechanisms) and read at run time: one
// lock, one duplicate check, one sorted listing.
package registry
