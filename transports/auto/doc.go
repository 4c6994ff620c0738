// Package auto is the runtime selector: the transport that loads a profile
// (package profile) and routes every message by its decisions. Inside
// it is one sm engine built with the profile's channel parameters (eager
// limit, cell, FIFO depth, fragments, progress mode), whose single-copy
// mechanism (CMA) takes exactly the size ranges the profile gives to cma.
// Every rank loads the profile itself and checks its content hash against
// the one the launching process loaded, so all ranks route alike.
package auto
