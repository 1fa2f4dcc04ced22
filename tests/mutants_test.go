package tests

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// mutant is a deliberately wrong kernel: the Go kernel with one fault.
type mutant struct {
	name  string
	field string // the Set field it corrupts
	mode  string // the input mode that must expose it
	t     int
	// wrap returns the faulty kernel built on the correct one.
	wrap func(e *env, ok invoker) invoker
}

var mutants = []mutant{
	{"one output off by 1e-3 relative", "SoftmaxValue", "random", 60, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			ok(a)
			y := a.s["y"]
			y[(a.t-1)*e.d+e.dh-1] *= 1 + 1e-3
			return 0
		}
	}},
	{"one probability off by 1e-4 relative", "SoftmaxValue", "random", 60, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			ok(a)
			p := a.s["a"]
			p[(a.t-1)*e.n+a.t/2] *= 1 + 1e-4
			return 0
		}
	}},
	{"writes above the diagonal", "SoftmaxValue", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			ok(a)
			a.s["a"][1] = 0 // row 0, column 1
			return 0
		}
	}},
	{"writes the next head's column", "SoftmaxValue", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			ok(a)
			a.s["y"][e.dh] = 0 // row 0, first column past the head
			return 0
		}
	}},
	{"writes past the end", "SoftmaxValue", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			ok(a)
			y := a.s["y"]
			y[:len(y)+1][len(y)] = 0
			return 0
		}
	}},
	{"reads above the diagonal", "SoftmaxValue", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			ok(a)
			a.s["y"][0] += 0 * a.s["b"][1] // b[0, 1] is a NaN guard
			return 0
		}
	}},
	{"skips the last row", "SoftmaxValue", "random", 15, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			a.t--
			return ok(a)
		}
	}},
	{"a fully masked row gives NaN", "SoftmaxValue", "masked", 15, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			ok(a)
			a.s["y"][0] = float32(math.NaN()) // row 0 is fully masked in this mode
			return 0
		}
	}},
	{"writes db before reading a (breaks db = a)", "SoftmaxValueBack", "alias", 15, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			db := a.s["db"]
			for i := 0; i < a.t; i++ {
				clear(db[i*e.n : i*e.n+i+1])
			}
			return ok(a)
		}
	}},
	{"overwrites instead of accumulating dw", "VanillaLogitsBackW", "random", 15, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			dw := a.s["dw"]
			for j := 0; j < a.t; j++ {
				clear(dw[j*e.d : j*e.d+e.dh])
			}
			return ok(a)
		}
	}},
	{"ignores the bias", "VanillaLogits", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			a.s["bias"] = nil
			return ok(a)
		}
	}},
	{"drops the last row of the sum", "TriDot", "integers", 60, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			a.t--
			return ok(a)
		}
	}},
}

// TestMutantsAreCaught runs each deliberately wrong kernel through the
// harness next to the correct Go kernel: the correct one must pass and the
// mutant must be reported, so a passing suite means something.
func TestMutantsAreCaught(t *testing.T) {
	const name = "odd"
	spec, err := kernels.Spec(name)
	if err != nil {
		t.Fatal(err)
	}
	e := envOf(spec)
	goK, err := kernels.LookupAt(name, kernels.Go)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			kt, ok := kernelTestFor(m.field)
			if !ok {
				t.Fatalf("no test for %s", m.field)
			}
			e, fn := e, field(goK.Set, m.field)
			if fn.IsNil() { // a kernel of aft specs only (Exp, Gate, GateBack)
				const other = "odd_aft_full"
				spec, err := kernels.Spec(other)
				if err != nil {
					t.Fatal(err)
				}
				set, err := kernels.LookupAt(other, kernels.Go)
				if err != nil {
					t.Fatal(err)
				}
				e, fn = envOf(spec), field(set.Set, m.field)
				if fn.IsNil() {
					t.Fatalf("neither %s nor %s has %s", name, other, m.field)
				}
			}
			good := bind(fn)
			sc := kt.scenario(e, m.field, m.t, m.mode, rngFor("mutant", m.name))
			sc.t, sc.label = m.t, m.mode
			problems := runScenario(sc, []level{{"go", good}, {"mutant", m.wrap(e, good)}})
			caught := false
			for _, p := range problems {
				if strings.Contains(p, " go: ") {
					t.Errorf("the correct kernel failed: %s", p)
				}
				if strings.Contains(p, " mutant: ") {
					caught = true
					t.Logf("reported: %s", p)
				}
			}
			if !caught {
				t.Errorf("mutant %q of %s was not caught", m.name, m.field)
			}
		})
	}
}

// TestCausalKernelOnSquareIsCaught: the causal kernels of odd have
// exactly the sizes of enc_odd's, its bidirectional twin; run on enc_odd's
// scenarios (the square i, j < t) in place of enc_odd's kernels, each
// must be reported, while enc_odd's own pass: the references and the
// guards tell the triangle from the square, for every kernel the
// bidirectional spec has.
func TestCausalKernelOnSquareIsCaught(t *testing.T) {
	const name, causal = "enc_odd", "odd"
	spec, err := kernels.Spec(name)
	if err != nil {
		t.Fatal(err)
	}
	e := envOf(spec)
	if !e.bidi {
		t.Fatalf("%s is not bidirectional", name)
	}
	bi, err := kernels.LookupAt(name, kernels.Go)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := kernels.LookupAt(causal, kernels.Go)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range bi.KernelNames() {
		kt, ok := kernelTestFor(f)
		if !ok || f == "GemmTile" || f == "GemmShape" {
			continue
		}
		k, ok := catalog.KindOf(field(bi.Set, f).Interface())
		if !ok || !catalog.Of(k).Causal {
			continue
		}
		t.Run(f, func(t *testing.T) {
			good, bad := bind(field(bi.Set, f)), bind(field(ca.Set, f))
			caught := false
			for _, tl := range []int{7, 15} {
				for _, mode := range kt.modes {
					sc := kt.scenario(e, f, tl, mode, rngFor("square", f, tl, mode))
					sc.t, sc.label = tl, fmt.Sprintf("t=%d %s", tl, mode)
					for _, p := range runScenario(sc, []level{{"go", good}, {"causal", bad}}) {
						if strings.Contains(p, " go: ") {
							t.Errorf("the bidirectional kernel failed: %s", p)
						}
						caught = caught || strings.Contains(p, " causal: ")
					}
				}
			}
			if !caught {
				t.Errorf("%s's causal %s passed on %s's square", causal, f, name)
			}
		})
	}
}
