package sm

// ProgressStarted reports whether the endpoint's progress goroutine runs.
func (e *Endpoint) ProgressStarted() bool { return e.async }
