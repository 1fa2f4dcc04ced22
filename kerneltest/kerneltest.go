// Package kerneltest holds the tests and benchmarks every generated
// package carries: synthgen writes a kernels_test.go beside each package's
// kernels whose functions only call Test and Benchmark (and
// kerneltest/trainstep's Benchmark) with the package's Spec, so that
//
//	go test ./internal/mymodel                # each kernel on each instruction set vs the portable Go kernels
//	go test -run '^$' -bench . ./internal/mymodel    # GFLOP/s per kernel and instruction set
//
// work in any module that generates a package, not only in synthgen's.
//
// Test calls every kernel of the package on every instruction set this
// CPU, this build and SYNTHGEN_ISA allow, on seeded random inputs and the
// inputs where kernels go wrong (awkward lengths, extreme logits, fully
// masked rows, empty optional arguments, odd tile corners), in guarded,
// misaligned buffers, and compares each result with the package's Go
// level (Compare; the GEMM micro-kernel with a float64 reference,
// CheckGemmTile). A level that cannot run is skipped with the reason. The
// calls go through package kerneltest/harness, which tests/ uses too.
//
// Benchmark measures one kernel at the spec's full size on each level,
// with sub-benchmarks named isa=go, isa=avx2, isa=avx512 so that
// `benchstat -col /isa` sets them side by side; it reports GFLOP/s (and
// %peak, the executed work over this core's measured FMA peak) with the
// FLOP conventions of the catalog (catalog.Op.Flops), or Gelem/s for the
// kernels without one (the row-wise kernels, aft_local, aft_conv,
// aft_simple).
//
// The repository's own suite (synthgen's tests/ directory) checks the
// kernels far more thoroughly, against float64 references; this package
// checks that a generated package's levels agree, where it is used. It
// depends on the kernel contract (runtime/kernels), the catalog and
// runtime/mat only: a generated package's test binary links neither the
// benchmark suite's comparisons (gonum, PyTorch) nor the training runtime.
package kerneltest

import (
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/internal/kernelbench"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// registered returns the kernel sets registered for spec this CPU runs
// (lowest level first), after checking that spec is the one registered
// under its name.
func registered(tb testing.TB, spec specs.Spec) []kernels.Set {
	tb.Helper()
	reg, err := kernels.Spec(spec.Name)
	if err != nil {
		tb.Fatalf("kerneltest: %v (is the generated package linked?)", err)
	}
	if reg != spec {
		tb.Fatalf("kerneltest: the spec registered as %q is %+v, not %+v: two packages claim the name", spec.Name, reg, spec)
	}
	sets, err := kernels.Sets(spec.Name)
	if err != nil {
		tb.Fatalf("kerneltest: %v", err)
	}
	if len(sets) == 0 || sets[0].ISA != kernels.Go {
		tb.Fatalf("kerneltest: spec %s registers no Go kernel set", spec.Name)
	}
	return sets
}

// limit is the highest level this run may use: the CPU's best, or
// SYNTHGEN_ISA's.
func limit(tb testing.TB) kernels.ISA {
	tb.Helper()
	l, err := kernels.Level()
	if err != nil {
		tb.Fatalf("kerneltest: %v", err)
	}
	return l
}

// levelOf returns the set of level isa among sets, or why this run cannot
// run that level.
func levelOf(spec specs.Spec, sets []kernels.Set, isa, ceiling kernels.ISA) (kernels.Set, string) {
	if isa > kernels.Go && noAsm != "" {
		return kernels.Set{}, fmt.Sprintf("isa=%s not compiled into this build: %s", isa, noAsm)
	}
	if !kernels.Supported(isa) {
		_, err := kernels.LookupAt(spec.Name, isa)
		if err == nil {
			err = fmt.Errorf("this CPU lacks its features")
		}
		return kernels.Set{}, fmt.Sprintf("isa=%s not supported: %v", isa, err)
	}
	if isa > ceiling {
		return kernels.Set{}, fmt.Sprintf("isa=%s above the cap: %s=%s limits this run to %s", isa, kernels.EnvISA, os.Getenv(kernels.EnvISA), ceiling)
	}
	for _, s := range sets {
		if s.ISA == isa {
			return s, ""
		}
	}
	return kernels.Set{}, fmt.Sprintf("isa=%s not generated: spec %s registers no %s kernel set", isa, spec.Name, isa)
}

// Level is one instruction set of a generated package as this run sees
// it: its kernel set, or why the run cannot execute it.
type Level struct {
	ISA  kernels.ISA
	Set  kernels.Set // the zero Set when Skip is set
	Skip string      // why this run cannot execute the level; "" when it can
}

// Levels returns every level of kernels.Levels() for spec, a linked generated
// package's Spec, with its set or the reason this run cannot execute it:
// not compiled into this build (the purego tag, or not amd64), not
// supported by this CPU, above SYNTHGEN_ISA's cap, or not generated. It
// fails tb when spec is not the one registered under its name.
func Levels(tb testing.TB, spec specs.Spec) []Level {
	tb.Helper()
	sets := registered(tb, spec)
	ceiling := limit(tb)
	var out []Level
	for _, isa := range kernels.Levels() {
		s, why := levelOf(spec, sets, isa, ceiling)
		out = append(out, Level{ISA: isa, Set: s, Skip: why})
	}
	return out
}

// provided lists the kernel fields any of sets provides, in kernels.Set's
// order; GemmShape goes with GemmTile and is not listed.
func provided(sets []kernels.Set) []string {
	typ := reflect.TypeOf(kernels.Set{})
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.Func || f.Name == "GemmShape" {
			continue
		}
		for _, s := range sets {
			if kernelbench.KernelOf(s, f.Name) != nil {
				out = append(out, f.Name)
				break
			}
		}
	}
	return out
}

// Test checks every kernel of spec, a linked generated package's Spec, on
// every instruction set above Go that this build holds, this CPU runs and
// SYNTHGEN_ISA allows, against the package's Go level (Compare), on the
// cases of Cases; and the Go level itself (isa=go: it writes every output
// entry and nothing outside its outputs' entries). Subtests are named
// kernel=<field>/isa=<level>/<case>, e.g.
// kernel=SoftmaxValue/isa=avx512/t=127/inputs=masked; a level that cannot
// run is skipped, saying why: not compiled into this build (the purego tag,
// or not amd64), not supported by this CPU (naming the missing features),
// above SYNTHGEN_ISA's cap, or not generated for this kernel.
func Test(t *testing.T, spec specs.Spec) {
	t.Helper()
	sets := registered(t, spec)
	ceiling := limit(t)
	goSet := sets[0]
	fields := provided(sets)
	if len(fields) == 0 {
		t.Fatalf("kerneltest: spec %s registers no kernels", spec.Name)
	}
	for _, field := range fields {
		t.Run("kernel="+field, func(t *testing.T) {
			t.Parallel()
			op, err := findOp(spec, field)
			if err != nil {
				t.Fatalf("kerneltest: %v", err)
			}
			if kernelbench.KernelOf(goSet, field) == nil {
				t.Fatalf("the Go level lacks %s, which a higher level provides", field)
			}
			cases, err := Cases(spec, field)
			if err != nil {
				t.Fatal(err)
			}
			prepared := make([]*call, len(cases)) // Go's results, shared by the levels
			for _, isa := range kernels.Levels() {
				t.Run("isa="+isa.String(), func(t *testing.T) {
					set, why := levelOf(spec, sets, isa, ceiling)
					if why != "" {
						t.Skip(why)
					}
					if kernelbench.KernelOf(set, field) == nil {
						t.Skipf("isa=%s does not provide %s: dispatch runs a lower level's", isa, field)
					}
					for i, c := range cases {
						t.Run(c.String(), func(t *testing.T) {
							var problems []string
							var err error
							if op.Kind == catalog.GemmTile {
								problems, err = Compare(spec, field, c, goSet, set)
							} else {
								if prepared[i] == nil {
									if prepared[i], err = newCall(spec, op, c, goSet); err != nil {
										t.Fatal(err)
									}
								}
								if isa == kernels.Go { // the reference run itself
									problems = prepared[i].checkSelf()
								} else {
									problems, err = prepared[i].check(set)
								}
							}
							if err != nil {
								t.Fatal(err)
							}
							for _, p := range problems {
								t.Errorf("%s at %s, %s: %s", field, isa, c, p)
							}
						})
					}
				})
			}
		})
	}
}

// Benchmark measures kernel (a kernels.Set field name, e.g.
// "SoftmaxValue") of spec, a linked generated package's Spec, on each
// level: sub-benchmarks <size>/isa=go|avx2|avx512, the levels this run
// cannot execute skipped with the reason. The sizes are the benchmark
// suite's (package bench): t = N for the sequence kernels, reporting
// GFLOP/s and %peak where the catalog has a FLOP convention and Gelem/s (t·DH
// outputs) where it has none; N rows for the row-wise kernels (AdamW: the
// D·FFN parameters of one feed-forward weight; the other Flat kinds: N·D floats), in Gelem/s; and for
// GemmTile the linear layers' products of kernelbench.GemmProducts
// (m=…/k=…/n=…/pass=…), in GFLOP/s, where isa=go is runtime/mat's plain-Go
// product, which the runtime uses at that level.
func Benchmark(b *testing.B, spec specs.Spec, kernel string) {
	b.Helper()
	sets := registered(b, spec)
	ceiling := limit(b)
	op, err := findOp(spec, kernel)
	if err != nil {
		b.Fatalf("kerneltest: %v", err)
	}
	cfg := catalog.ConfigOf(&spec)
	for _, isa := range kernels.Levels() {
		set, why := levelOf(spec, sets, isa, ceiling)
		if why == "" && kernelbench.KernelOf(set, kernel) == nil {
			why = fmt.Sprintf("isa=%s does not provide %s", isa, kernel)
		}
		if op.Kind == catalog.GemmTile {
			if why != "" {
				b.Run("isa="+isa.String(), func(b *testing.B) { b.Skip(why) })
				continue
			}
			for _, c := range kernelbench.GemmProducts(spec, set) {
				b.Run(c.Name+"/isa="+isa.String(), func(b *testing.B) {
					for b.Loop() {
						c.Run()
					}
					report(b, c, 0)
				})
			}
			continue
		}
		size, n := fmt.Sprintf("t=%d", spec.N), spec.N
		if op.Kind.RowWise() {
			size = fmt.Sprintf("rows=%d", spec.N)
			switch {
			case op.Kind == catalog.AdamW:
				n = spec.D * spec.FFN
				size = fmt.Sprintf("params=%d", n)
			case op.Kind.Flat():
				n = spec.N * spec.D // one sequence's [N, D] activations
				size = fmt.Sprintf("floats=%d", n)
			}
		}
		b.Run(size+"/isa="+isa.String(), func(b *testing.B) {
			if why != "" {
				b.Skip(why)
			}
			a := kernelbench.Args(spec, op, sets[0], n)
			run := op.Bind(kernelbench.KernelOf(set, kernel), n, a, nil)
			if run == nil {
				b.Fatalf("kerneltest: cannot call %s", kernel)
			}
			var sink float32
			for b.Loop() {
				sink += run()
			}
			kernelbench.Sink = sink
			c := kernelbench.Case{Flops: op.Flops(cfg, n), Executed: op.Executed(cfg, n)}
			elems := float64(n * cfg.DH) // the outputs of a sequence kernel
			if op.Kind.RowWise() {
				elems = op.RowElems(n)
			}
			report(b, c, elems)
		})
	}
}

// report reports c's GFLOP/s and %peak, or, for a case without a FLOP
// count, elems elements per call in Gelem/s.
func report(b *testing.B, c kernelbench.Case, elems float64) {
	sec := b.Elapsed().Seconds()
	if sec <= 0 {
		return
	}
	if gflops, peak := c.Rates(b.N, sec); gflops > 0 {
		b.ReportMetric(gflops, "GFLOP/s")
		if peak > 0 {
			b.ReportMetric(peak, "%peak")
		}
		return
	}
	if elems > 0 {
		b.ReportMetric(elems*float64(b.N)/sec/1e9, "Gelem/s")
	}
}
