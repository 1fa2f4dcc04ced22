package kerneltest

import (
	"math"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generated/odd"
	"github.com/synthgen/synthgen/generated/odd_aft_local"
	"github.com/synthgen/synthgen/generated/odd_linear"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// goSetOf returns the Go kernel set registered for spec.
func goSetOf(t *testing.T, spec specs.Spec) kernels.Set {
	t.Helper()
	return registered(t, spec)[0]
}

// TestGoAgreesWithItself runs every case of every kernel of three
// packages with the Go level as both reference and candidate: no problem
// may be reported (the checks have no false alarms on a correct kernel).
func TestGoAgreesWithItself(t *testing.T) {
	for _, spec := range []specs.Spec{odd.Spec, odd_aft_local.Spec, odd_linear.Spec} {
		g := goSetOf(t, spec)
		for _, field := range provided([]kernels.Set{g}) {
			cases, err := Cases(spec, field)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				problems, err := Compare(spec, field, c, g, g)
				if err != nil {
					t.Fatalf("%s %s %s: %v", spec.Name, field, c, err)
				}
				for _, p := range problems {
					t.Errorf("%s %s %s: %s", spec.Name, field, c, p)
				}
			}
		}
	}
}

// mutant is a deliberately wrong kernel: the Go set with one kernel
// replaced, the case it must fail on, and a phrase the report must hold.
type mutant struct {
	name   string
	spec   specs.Spec
	kernel string
	c      Case
	want   string
	set    func(g kernels.Set) kernels.Set
}

func mutants() []mutant {
	n, d := odd.Spec.N, odd.Spec.D
	tc := func(t int, in string) Case { return Case{T: t, Inputs: in, unit: "t"} }
	return []mutant{
		{"SoftmaxValue drops the last row's last key from y", odd.Spec, "SoftmaxValue", tc(n, "random"), "differ", func(g kernels.Set) kernels.Set {
			f := g.SoftmaxValue
			dh := odd.Spec.DH()
			g.SoftmaxValue = func(t int, b, a, v, y []float32) {
				f(t, b, a, v, y)
				i := t - 1
				for c := 0; c < dh; c++ {
					y[i*d+c] -= a[i*n+i] * v[i*d+c]
				}
			}
			return g
		}},
		{"SoftmaxValue writes above the causal triangle", odd.Spec, "SoftmaxValue", tc(13, "masked"), "outside", func(g kernels.Set) kernels.Set {
			f := g.SoftmaxValue
			g.SoftmaxValue = func(t int, b, a, v, y []float32) { f(t, b, a, v, y); a[1] = 0 }
			return g
		}},
		{"SoftmaxValue leaves the tail rows", odd.Spec, "SoftmaxValue", tc(n-1, "extreme"), "unwritten", func(g kernels.Set) kernels.Set {
			f := g.SoftmaxValue
			g.SoftmaxValue = func(t int, b, a, v, y []float32) { f(t&^7, b, a, v, y) }
			return g
		}},
		{"Product drops the bias", odd.Spec, "VanillaLogits", tc(n, "random"), "differ", func(g kernels.Set) kernels.Set {
			f := g.VanillaLogits
			g.VanillaLogits = func(t int, x, w, bias, c []float32, scale float32) { f(t, x, w, nil, c, scale) }
			return g
		}},
		{"TriDot counts one term twice", odd.Spec, "TriDot", tc(n, "random"), "returned", func(g kernels.Set) kernels.Set {
			f := g.TriDot
			g.TriDot = func(t int, x, y []float32) float32 { return f(t, x, y) + x[n*(t-1)+3]*y[n*(t-1)+3] }
			return g
		}},
		{"LayerNorm writes its input", odd.Spec, "LayerNorm", Case{T: 7, Inputs: "random", unit: "rows"}, "read-only", func(g kernels.Set) kernels.Set {
			f := g.LayerNorm
			g.LayerNorm = func(t int, x, gamma, beta, y, mu, rs []float32) { f(t, x, gamma, beta, y, mu, rs); x[0] = 0 }
			return g
		}},
		{"AdamW skips the last parameter", odd.Spec, "AdamW", Case{T: 33, Inputs: "random", unit: "rows"}, "differ", func(g kernels.Set) kernels.Set {
			f := g.AdamW
			g.AdamW = func(t int, p, gr, m, v []float32, decay, gscale, b1, c1, b2, c2, eps, step, rbc2 float32) {
				f(t-1, p, gr, m, v, decay, gscale, b1, c1, b2, c2, eps, step, rbc2)
			}
			return g
		}},
		{"GemmTile drops the last column", odd.Spec, "GemmTile", Case{T: 13, Inputs: "colmajor-edge", unit: "kc"}, "c:", func(g kernels.Set) kernels.Set {
			f := g.GemmTile
			g.GemmTile = func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
				f(kc, a, ai, ap, at, b, bp, c, ldc, mr, nr-1, bias, asum, apack, bpack, ow)
			}
			return g
		}},
		{"GemmTile zeroes the last float of its copy of B", odd.Spec, "GemmTile", Case{T: 13, Inputs: "rowmajor-copyb", unit: "kc"}, "bpack:", func(g kernels.Set) kernels.Set {
			f := g.GemmTile
			g.GemmTile = func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
				f(kc, a, ai, ap, at, b, bp, c, ldc, mr, nr, bias, asum, apack, bpack, ow)
				if len(bpack) > 0 {
					bpack[len(bpack)-1] = 0
				}
			}
			return g
		}},
		{"GemmTile steps A by a tile of rows, not by at", odd.Spec, "GemmTile", Case{T: 13, Inputs: "tiles-panels", unit: "kc"}, "c:", func(g kernels.Set) kernels.Set {
			f := g.GemmTile
			mrMax, _ := g.GemmShape()
			g.GemmTile = func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
				f(kc, a, ai, ap, mrMax*ai, b, bp, c, ldc, mr, nr, bias, asum, apack, bpack, ow)
			}
			return g
		}},
		{"GemmTile copies A from the wrong p", odd.Spec, "GemmTile", Case{T: 13, Inputs: "colmajor-copies", unit: "kc"}, "apack:", func(g kernels.Set) kernels.Set {
			f := g.GemmTile
			g.GemmTile = func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
				f(kc, a, ai, ap, at, b, bp, c, ldc, mr, nr, bias, asum, apack, bpack, ow)
				if len(apack) > 0 && kc > 1 {
					apack[0] = a[ap]
				}
			}
			return g
		}},
		{"AFTLocal takes the window one too wide", odd_aft_local.Spec, "AFTLocal", tc(odd_aft_local.Spec.N, "random"), "differ", func(g kernels.Set) kernels.Set {
			full := g.AFTLocal
			g.AFTLocal = func(t int, k, v, w, z, m, rd []float32) {
				full(t, k, v, w, z, m, rd)
				// Recompute row t−1 channel 0 with one more key in the window,
				// as an off-by-one in the band would.
				win := odd_aft_local.Spec.Window
				i, dd := t-1, odd_aft_local.Spec.D
				if i < win {
					return
				}
				e := func(j int) float64 {
					if i-j <= win {
						return float64(k[j*dd] + w[i*odd_aft_local.Spec.N+j])
					}
					return float64(k[j*dd])
				}
				mx, s, num := -1e30, 0.0, 0.0
				for j := 0; j <= i; j++ {
					mx = max(mx, e(j))
				}
				for j := 0; j <= i; j++ {
					p := math.Exp(e(j) - mx)
					s += p
					num += p * float64(v[j*dd])
				}
				z[i*dd] = float32(num / s)
			}
			return g
		}},
		{"LinearBack leaves dv's tail", odd_linear.Spec, "LinearBack", tc(13, "random"), "unwritten", func(g kernels.Set) kernels.Set {
			f := g.LinearBack
			g.LinearBack = func(t int, fq, fk, v, y, rd, dy, dfq, dfk, dv []float32) {
				dvCopy := append([]float32(nil), dv...)
				f(t, fq, fk, v, y, rd, dy, dfq, dfk, dv)
				copy(dv[len(dv)-3:], dvCopy[len(dv)-3:])
			}
			return g
		}},
	}
}

// TestCatchesMutants checks that Compare reports each deliberately wrong
// kernel: Test can fail.
func TestCatchesMutants(t *testing.T) {
	for _, m := range mutants() {
		t.Run(strings.ReplaceAll(m.name, " ", "_"), func(t *testing.T) {
			g := goSetOf(t, m.spec)
			bad := m.set(g)
			bad.ISA = kernels.AVX2 // as a higher level would be
			problems, err := Compare(m.spec, m.kernel, m.c, g, bad)
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) == 0 {
				t.Fatalf("%s passed", m.name)
			}
			joined := strings.Join(problems, "\n")
			if !strings.Contains(joined, m.want) {
				t.Errorf("%s: report lacks %q:\n%s", m.name, m.want, joined)
			}
			t.Logf("%s:\n%s", m.name, joined)
		})
	}
}

// TestSkipReasons checks that a level a run cannot execute is refused with
// a reason naming the cause.
func TestSkipReasons(t *testing.T) {
	t.Setenv(kernels.EnvISA, "generic")
	sets := registered(t, odd.Spec)
	ceiling := limit(t)
	if ceiling != kernels.Go {
		t.Fatalf("SYNTHGEN_ISA=generic: level %s", ceiling)
	}
	if _, why := levelOf(odd.Spec, sets, kernels.Go, ceiling); why != "" {
		t.Errorf("Go level refused: %s", why)
	}
	for _, isa := range []kernels.ISA{kernels.AVX2, kernels.AVX512} {
		_, why := levelOf(odd.Spec, sets, isa, ceiling)
		var want string
		switch {
		case noAsm != "":
			want = "not compiled into this build"
		case !kernels.Supported(isa):
			want = "this CPU lacks"
		default:
			want = "SYNTHGEN_ISA=generic limits this run to go"
		}
		if !strings.Contains(why, want) {
			t.Errorf("%s: reason %q, want one containing %q", isa, why, want)
		}
	}
}

// TestCaseNames checks the subtest names Test gives the cases.
func TestCaseNames(t *testing.T) {
	for kernel, want := range map[string]string{
		"SoftmaxValue": "t=60/inputs=random t=60/inputs=extreme t=60/inputs=masked t=59/inputs=random",
		"LayerNorm":    "rows=60/inputs=random rows=60/inputs=offset rows=7/inputs=random",
		"GemmTile":     "kc=36/inputs=packed kc=36/inputs=rowmajor-edge kc=13/inputs=colmajor-edge",
	} {
		cases, err := Cases(odd.Spec, kernel)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range cases {
			got = append(got, c.String())
		}
		if !strings.HasPrefix(strings.Join(got, " "), want) {
			t.Errorf("%s: cases %v, want them to begin %s", kernel, got, want)
		}
	}
	if _, err := Cases(odd.Spec, "AFTFull"); err == nil {
		t.Error("Cases of a kernel the spec lacks: no error")
	}
}

// TestSelfCheck checks that the isa=go subtests report a reference that
// writes where it may not or leaves outputs unwritten.
func TestSelfCheck(t *testing.T) {
	for _, m := range mutants() {
		if m.want != "outside" && m.want != "unwritten" {
			continue
		}
		op, err := findOp(m.spec, m.kernel)
		if err != nil {
			t.Fatal(err)
		}
		k, err := newCall(m.spec, op, m.c, m.set(goSetOf(t, m.spec)))
		if err != nil {
			t.Fatal(err)
		}
		if len(k.checkSelf()) == 0 {
			t.Errorf("%s: passed as the reference", m.name)
		}
	}
}
