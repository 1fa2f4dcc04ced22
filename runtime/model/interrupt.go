package model

// SetInterrupt makes Forward and Backward on ws call stop between layers
// (a few dozen calls a step, so it must be cheap: an atomic load, a
// context's Err); once it returns true, the pass returns at once, and
// Interrupted reports it. An interrupted pass leaves its results invalid:
// Forward's loss is NaN and its logits unavailable, Backward's gradients
// incomplete, and either needs a new Forward before a Backward. A pass
// never writes the parameters, so an interrupted training step that skips
// its optimizer update leaves the weights as they were. nil removes it.
// Set it while no pass runs on ws.
func (ws *Workspace) SetInterrupt(stop func() bool) { ws.interrupt = stop }

// Interrupted says that the last Forward or Backward on ws returned early
// because SetInterrupt's function returned true.
func (ws *Workspace) Interrupted() bool { return ws.interrupted }

// stopHere is the check between layers: true (and ws marked interrupted)
// when the interrupt asks to stop.
func (ws *Workspace) stopHere() bool {
	if ws.interrupt != nil && ws.interrupt() {
		ws.interrupted, ws.fwdDone = true, false
		return true
	}
	return false
}
