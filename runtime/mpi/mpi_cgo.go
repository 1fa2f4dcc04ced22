//go:build mpi && cgo

package mpi

/*
#cgo pkg-config: ompi
#include <stdlib.h>
#include <mpi.h>

// The MPI handles are macros (pointers to Open MPI's globals), so the calls
// are wrapped in C; every call works on MPI_COMM_WORLD.

static int sg_init(int *rank, int *size, int *provided) {
	int flag = 0, rc;
	MPI_Initialized(&flag);
	if (!flag) {
		rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, provided);
		if (rc != MPI_SUCCESS) return rc;
	} else {
		MPI_Query_thread(provided);
	}
	// Errors come back as return codes (turned into Go errors) rather
	// than aborting inside the library.
	rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_rank(MPI_COMM_WORLD, rank);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Comm_size(MPI_COMM_WORLD, size);
}

static int sg_allreduce_f32(float *buf, int n) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

static int sg_allreduce_f64(double *buf, int n) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

static int sg_bcast_f32(float *buf, int n, int root) {
	return MPI_Bcast(buf, n, MPI_FLOAT, root, MPI_COMM_WORLD);
}

static int sg_bcast_f64(double *buf, int n, int root) {
	return MPI_Bcast(buf, n, MPI_DOUBLE, root, MPI_COMM_WORLD);
}

static int sg_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD); }

static int sg_finalize(void) {
	int flag = 0;
	MPI_Finalized(&flag);
	if (flag) return MPI_SUCCESS;
	return MPI_Finalize();
}

static void sg_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

static int sg_thread_serialized(void) { return MPI_THREAD_SERIALIZED; }

static void sg_error_string(int rc, char *buf, int *len) {
	if (MPI_Error_string(rc, buf, len) != MPI_SUCCESS) *len = 0;
}

static int sg_max_error_string(void) { return MPI_MAX_ERROR_STRING; }
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"
)

const enabled = true

// mpiError is a failed MPI call's return code and its MPI_Error_string.
type mpiError struct {
	code int
	msg  string
}

func (e *mpiError) Error() string { return fmt.Sprintf("%s (MPI error %d)", e.msg, e.code) }

func check(rc C.int) error {
	if rc == 0 { // MPI_SUCCESS
		return nil
	}
	n := C.sg_max_error_string()
	buf := (*C.char)(C.malloc(C.size_t(n) + 1))
	defer C.free(unsafe.Pointer(buf))
	var l C.int
	C.sg_error_string(rc, buf, &l)
	return &mpiError{code: int(rc), msg: C.GoStringN(buf, l)}
}

func initMPI() (rank, size int, err error) {
	// Open MPI intercepts SIGABRT, SIGBUS, SIGFPE and SIGSEGV by default
	// to print its own backtrace, but not where a handler is installed
	// already, as Go's are; Go needs SIGSEGV for its nil-pointer panics,
	// so Open MPI is also told to leave signals alone, unless the user set
	// the parameter.
	if _, ok := os.LookupEnv("OMPI_MCA_opal_signal"); !ok {
		os.Setenv("OMPI_MCA_opal_signal", "")
	}
	var r, s, provided C.int
	if err := check(C.sg_init(&r, &s, &provided)); err != nil {
		return 0, 0, err
	}
	if provided < C.sg_thread_serialized() {
		C.sg_abort(1)
		return 0, 0, fmt.Errorf("the MPI library provides thread level %d, below MPI_THREAD_SERIALIZED (%d), which Go's goroutines need", provided, C.sg_thread_serialized())
	}
	return int(r), int(s), nil
}

func allreduceF32(b []float32) error {
	if len(b) == 0 {
		return nil
	}
	return check(C.sg_allreduce_f32((*C.float)(unsafe.Pointer(&b[0])), C.int(len(b))))
}

func allreduceF64(b []float64) error {
	if len(b) == 0 {
		return nil
	}
	return check(C.sg_allreduce_f64((*C.double)(unsafe.Pointer(&b[0])), C.int(len(b))))
}

func bcastF32(b []float32, root int) error {
	if len(b) == 0 {
		return nil
	}
	return check(C.sg_bcast_f32((*C.float)(unsafe.Pointer(&b[0])), C.int(len(b)), C.int(root)))
}

func bcastF64(b []float64, root int) error {
	if len(b) == 0 {
		return nil
	}
	return check(C.sg_bcast_f64((*C.double)(unsafe.Pointer(&b[0])), C.int(len(b)), C.int(root)))
}

func barrier() error { return check(C.sg_barrier()) }

func finalize() error { return check(C.sg_finalize()) }

func abort(code int) { C.sg_abort(C.int(code)) }
