package synth

import "runtime"

// WorkersPerCPU bounds Workers: MaxWorkers is this many goroutines per CPU.
// Every parallel section wakes every worker, so workers far beyond the
// CPUs only slow a run (about quadratically), and a huge count exhausts
// memory.
const WorkersPerCPU = 4

// MaxWorkers is the most goroutines Workers accepts without
// AllowManyWorkers: WorkersPerCPU × the CPUs.
func MaxWorkers() int { return WorkersPerCPU * runtime.NumCPU() }

// AllowManyWorkers lifts MaxWorkers's bound on Workers (synth train -force).
func AllowManyWorkers() Option { return setter("many-workers", func(*options) {}) }
