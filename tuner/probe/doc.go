// Package probe holds the hazard probes of the tuner's safety phase
// (DESIGN §6). Each probe drives fresh rank processes through a bounded
// scenario under the launcher's watchdog, validates every payload, and comes
// with a deliberately unsafe variant that the watchdog must catch: that is
// how we know the detector works. A verdict is Passed, HazardDetected (a
// hang, a stall or corrupted data) or ProbeFailed (the probe itself broke).
package probe
