package tests

import (
	"math"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// The fuzz targets vary the length, the inputs (through a seed and a
// mode) and their scale, from tiny to huge, on the odd and small specs,
// and compare every level this run can execute with the float64 reference
// under the same guards and tolerances as TestKernels. Their seed corpus
// runs as ordinary tests:
//
//	go test ./tests -run '^$' -fuzz FuzzSoftmaxValue$ -fuzztime 1m

// fuzzSpecs are the specs the fuzz targets pick from.
var fuzzSpecs = []string{"odd", "small"}

// fuzzSeeds are the seed corpus: lengths (taken modulo N, plus one), seeds,
// scales and spec choices, including zero, negative, tiny and huge scales.
var fuzzSeeds = []struct {
	t     uint16
	seed  uint64
	scale float32
	spec  uint8
}{
	{0, 1, 1, 0}, {1, 2, 1, 1}, {6, 3, 2, 0}, {14, 4, 0.5, 1},
	{59, 5, 1, 0}, {63, 6, 1, 1}, {58, 7, 10, 0}, {62, 8, 1e4, 1},
	{30, 9, 1e4, 0}, {45, 10, 1e30, 1}, {59, 11, 3e38, 0}, {20, 12, -7, 1},
	{10, 13, 0, 0}, {40, 14, 1e-30, 1}, {17, 15, 1e-3, 0}, {63, 16, 100, 1},
}

// fuzzCase prepares the common part of one fuzz input; ok is false for
// inputs the targets skip (a scale that is not a finite number).
func fuzzCase(t *testing.T, tRaw uint16, scale float32, spec uint8) (e *env, tl int, ok bool) {
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		return nil, 0, false
	}
	s, err := kernels.Spec(fuzzSpecs[int(spec)%len(fuzzSpecs)])
	if err != nil {
		t.Fatal(err)
	}
	e = envOf(s)
	return e, 1 + int(tRaw)%e.n, true
}

// clampScale limits a scale to [1e-15, 1e15] in magnitude, for values
// whose products must stay inside float32's range.
func clampScale(s float64) float64 {
	a := math.Abs(s)
	if a == 0 {
		return 0
	}
	return math.Max(1e-15, math.Min(1e15, a))
}

var softmaxModes = []string{"random", "extreme", "masked", "alias"}

// FuzzSoftmaxValue: the logits are scaled by scale (any finite value;
// products beyond float32's range clamp to ±MaxFloat32), the values v by
// |scale| clamped to [1e-15, 1e15].
func FuzzSoftmaxValue(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.t, s.seed, s.scale, s.spec)
	}
	f.Fuzz(func(t *testing.T, tRaw uint16, seed uint64, scale float32, spec uint8) {
		e, tl, ok := fuzzCase(t, tRaw, scale, spec)
		if !ok {
			t.Skip("scale is not finite")
		}
		mode := softmaxModes[seed%uint64(len(softmaxModes))]
		sc := softmaxValueScenario(e, tl, mode, rngFor("fuzz", seed), clampScale(float64(scale)), float64(scale))
		sc.t, sc.label = tl, mode
		for _, p := range runScenario(sc, levelsFor(t, levelsOf(t, e.name), e.name, "SoftmaxValue")) {
			t.Error(p)
		}
	})
}

var softmaxBackModes = []string{"random", "alias", "integers"}

// FuzzSoftmaxValueBack: the probabilities come from logits scaled by
// scale (any finite value), v and dy are scaled by |scale| clamped to
// [1e-15, 1e15].
func FuzzSoftmaxValueBack(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.t, s.seed, s.scale, s.spec)
	}
	f.Fuzz(func(t *testing.T, tRaw uint16, seed uint64, scale float32, spec uint8) {
		e, tl, ok := fuzzCase(t, tRaw, scale, spec)
		if !ok {
			t.Skip("scale is not finite")
		}
		mode := softmaxBackModes[seed%uint64(len(softmaxBackModes))]
		sc := softmaxValueBackScenario(e, tl, mode, rngFor("fuzz", seed), clampScale(float64(scale)), float64(scale))
		sc.t, sc.label = tl, mode
		for _, p := range runScenario(sc, levelsFor(t, levelsOf(t, e.name), e.name, "SoftmaxValueBack")) {
			t.Error(p)
		}
	})
}
