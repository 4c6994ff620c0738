package sm

// ProgressStarted reports whether the endpoint's progress goroutine runs.
func (e *Endpoint) ProgressStarted() bool { return e.async }

// ProgressExited reports whether the endpoint's progress goroutine, made
// by New with sm.progress=thread, has returned.
func (e *Endpoint) ProgressExited() bool {
	select {
	case <-e.progressDone:
		return true
	default:
		return false
	}
}

// ProgressThread is the thread the progress goroutine locked before New
// returned (0: none).
func (e *Endpoint) ProgressThread() int { return e.progressTID }
