//go:build mpi && !cgo

package mpi

// The mpi build tag links Open MPI through cgo: building with it and
// CGO_ENABLED=0 stops here.
var _ = the_mpi_build_tag_needs_cgo__set_CGO_ENABLED_1_and_install_libopenmpi_dev
