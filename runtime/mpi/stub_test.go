//go:build !mpi || !cgo

package mpi

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestOneRankWithoutMPI: built without the tag, Init is a world of one
// rank whose collective calls leave buffers as they are.
func TestOneRankWithoutMPI(t *testing.T) {
	for _, k := range []string{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMIX_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"} {
		t.Setenv(k, "")
	}
	if Enabled {
		t.Fatal("Enabled without the mpi tag")
	}
	c, err := Init()
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank() != 0 || c.Size() != 1 {
		t.Fatalf("rank %d of %d, want 0 of 1", c.Rank(), c.Size())
	}
	f := []float32{1, 2, 3}
	d := []float64{4, 5}
	if err := c.AllreduceFloat32(f); err != nil {
		t.Fatal(err)
	}
	if err := c.AllreduceFloat64(d); err != nil {
		t.Fatal(err)
	}
	if err := c.BcastFloat32(f, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.BcastFloat64(d, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.BcastFloat64(d, 1); err == nil {
		t.Error("broadcast from rank 1 of a world of 1: no error")
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if f[0] != 1 || f[2] != 3 || d[1] != 5 {
		t.Errorf("buffers changed: %v %v", f, d)
	}
	c.Watchdog(time.Second, nil) // a world of one never waits: no watchdog
	if s := c.Stats()["MPI_Allreduce"]; s.Calls != 2 || s.Bytes != 12+16 {
		t.Errorf("allreduce stats %+v, want 2 calls of 28 bytes", s)
	}
	if c2, _ := Init(); c2 != c {
		t.Error("a second Init made another Comm")
	}
}

// TestLaunchedWithoutMPI: a program built without the tag but started by
// mpirun as one of several ranks says how to rebuild, rather than running
// P independent copies that overwrite each other's checkpoints.
func TestLaunchedWithoutMPI(t *testing.T) {
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	_, _, err := initMPI()
	if !errors.Is(err, ErrNoMPI) {
		t.Fatalf("err = %v, want ErrNoMPI", err)
	}
	for _, want := range []string{"one of 2 MPI ranks", "rebuild with -tags mpi", "libopenmpi-dev"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "1")
	if _, size, err := initMPI(); err != nil || size != 1 {
		t.Errorf("mpirun -np 1: size %d, err %v; want a world of one", size, err)
	}
}
