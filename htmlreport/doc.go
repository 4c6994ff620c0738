// Package htmlreport draws a sweep's run directory as one self-contained HTML
// page (report.html: styles and the plots' font inline, every plot an
// inline SVG, no script and nothing fetched) with each plot also written as
// an SVG file beside it: latency and bandwidth against message size with
// the confidence band of every point, every stage's candidates with the
// winner and why it won, the decisions drawn where they were made (eager
// limit, fragment size, transport crossovers, FIFO depth with its memory
// footprint against ranks per node, the inter-node and GPU thresholds),
// the hazard verdicts with the stacks the watchdog took of every caught
// hang, and the machine. It also draws comparisons (bench/compare tables)
// as overlaid curves with ratio plots.
//
// The decisions come from tuner/sweep's own replay (Tune, on a copy of the
// run's store, so that the run directory is never rewritten), not from the
// summary's text. Plots are drawn with gonum.org/v1/plot.
package htmlreport
