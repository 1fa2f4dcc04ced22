//go:build !mpi || !cgo

package mpi

import (
	"fmt"
	"os"
)

const enabled = false

// initMPI, without MPI, is a world of one rank, unless a launcher started
// this process as one of several.
func initMPI() (rank, size int, err error) {
	if n, ok := Launched(); ok && n != 1 {
		what := "one of several MPI ranks"
		if n > 1 {
			what = fmt.Sprintf("one of %d MPI ranks", n)
		}
		return 0, 0, fmt.Errorf("this process was started as %s, but %w", what, ErrNoMPI)
	}
	return 0, 1, nil
}

// In a world of one rank, a sum over the ranks and a broadcast leave the
// buffer as it is.

func allreduceF32([]float32) error  { return nil }
func allreduceF64([]float64) error  { return nil }
func bcastF32([]float32, int) error { return nil }
func bcastF64([]float64, int) error { return nil }
func barrier() error                { return nil }
func finalize() error               { return nil }
func abort(code int)                { os.Exit(code) }
