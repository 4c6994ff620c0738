// Package tools holds the test of the scripts under tools/: the A/B
// drivers and analyses that produced some of the experiments' data in
// results/ (each directory's README says what its scripts do and how to
// run them). The test runs every script with python3 on a small fixture,
// with fake gotune, mpirun and probe programs, so that a change that breaks
// one shows here and not at the next experiment.
package tools
