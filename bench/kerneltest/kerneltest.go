// Package kerneltest forwards to github.com/synthgen/synthgen/kerneltest,
// where the tests and benchmarks of generated packages moved, so that
// packages generated before the move still compile.
//
// Deprecated: regenerate the package (go generate), which makes its
// kernels_test.go import github.com/synthgen/synthgen/kerneltest and
// github.com/synthgen/synthgen/kerneltest/trainstep. This package goes in
// the next release.
package kerneltest

import (
	"testing"

	"github.com/synthgen/synthgen/kerneltest"
	"github.com/synthgen/synthgen/kerneltest/trainstep"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// RelTol is kerneltest.RelTol.
//
// Deprecated: use kerneltest.RelTol.
const RelTol = kerneltest.RelTol

// Case is kerneltest.Case.
//
// Deprecated: use kerneltest.Case.
type Case = kerneltest.Case

// Test is kerneltest.Test.
//
// Deprecated: use kerneltest.Test.
func Test(t *testing.T, spec specs.Spec) {
	t.Helper()
	kerneltest.Test(t, spec)
}

// Benchmark is kerneltest.Benchmark.
//
// Deprecated: use kerneltest.Benchmark.
func Benchmark(b *testing.B, spec specs.Spec, kernel string) {
	b.Helper()
	kerneltest.Benchmark(b, spec, kernel)
}

// BenchmarkTrainStep is trainstep.Benchmark.
//
// Deprecated: use trainstep.Benchmark.
func BenchmarkTrainStep(b *testing.B, spec specs.Spec) {
	b.Helper()
	trainstep.Benchmark(b, spec)
}

// Cases is kerneltest.Cases.
//
// Deprecated: use kerneltest.Cases.
func Cases(spec specs.Spec, kernel string) ([]Case, error) { return kerneltest.Cases(spec, kernel) }

// Compare is kerneltest.Compare.
//
// Deprecated: use kerneltest.Compare.
func Compare(spec specs.Spec, kernel string, c Case, ref, got kernels.Set) ([]string, error) {
	return kerneltest.Compare(spec, kernel, c, ref, got)
}
