//go:build !mpi || !cgo || !linux

package mpi

import "time"

// startReaper needs Linux's pidfds and MPI; elsewhere it starts nothing.
func startReaper(grace time.Duration) *reaper { return nil }

func releaseReaper(*reaper) {}
