// Package sm is the shared-memory copy-in/copy-out transport and the progress
// engine that single-copy transports (CMA today; XPMEM, KNEM, CUDA IPC later)
// plug into.
//
// Every ordered pair of ranks owns one single-producer/single-consumer channel
// in the job's shared segment: a ring of fixed-size cells and a ring of
// fragment slots. A cell's first word is its sequence number, written last,
// so a receiver polls one cache line and finds the header and an eager
// payload together. Messages up to the eager limit travel inline in one cell;
// larger ones are pipelined through the fragment slots (one descriptor cell
// per fragment); with a single-copy mechanism attached, messages from its
// threshold up use rendezvous: a request-to-send cell, one copy by the
// mechanism, and a completion cell.
//
// A rank waiting for anything (a send blocked on a full ring included) keeps
// draining every incoming channel into posted receives or the unexpected
// queue, so head-to-head sends cannot deadlock on ring space.
package sm
