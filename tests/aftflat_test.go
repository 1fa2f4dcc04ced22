package tests

import (
	"math"
	"math/rand/v2"
	"runtime/debug"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// The factorised aft_full's element-wise kernels (AFTMax, AFTFactors,
// AFTQuot, AFTQuotBack, AFTKVBack, aft_full's specs) on t consecutive
// floats, against float64 references, run by TestKernels like the
// row-wise kernels. Tolerances, with u = 2⁻²⁴:
//   - AFTMax: exact (it chooses one of its inputs).
//   - AFTQuot: one correctly rounded division: u relative, plus 2⁻¹²⁶ for
//     subnormal results.
//   - AFTFactors: ek as Exp's (4u relative, 2⁻¹²⁶ absolute) of the
//     float32 difference k − kappa, which is rounded first (u relative of
//     the difference, so ek errs by u·|k − kappa| more); kv = ek·v one
//     rounding more.
//   - AFTQuotBack: r = 1/den and one or two products, each rounded once:
//     3u relative for dnum, 4u for dden (a u of slack over the roundings'
//     count), plus 2⁻¹²⁶ for subnormal results.
//   - AFTKVBack: dv one product (u); dk = ek·(v·g1 + g2) rounds the
//     product, the sum and the product: 2u of |ek|·(|v·g1| + |g2|) plus u.
// All but AFTFactors perform the same float32 operations at every level,
// in the same order, which TestAFTFlatMatchesGoLevel checks bit for bit.

func init() {
	for name, kt := range map[string]kernelTest{
		"AFTMax": aftMaxTest, "AFTFactors": aftFactorsTest, "AFTQuot": aftQuotTest,
		"AFTQuotBack": aftQuotBackTest, "AFTKVBack": aftKVBackTest,
	} {
		kt.lengths = rowLengths
		kernelTests[name] = kt
	}
	mutants = append(mutants, aftFlatMutants...)
}

// flatOps lays out operands of t floats each: the inputs (in, or acc for
// those the kernel may overwrite) with their values, then the outputs.
func flatOps(l layout, ins map[string][]float32, order []string, outs ...string) []*operand {
	var ops []*operand
	for _, name := range order {
		ops = append(ops, &operand{name: name, lay: l, role: in, vals: ins[name]})
	}
	for _, name := range outs {
		ops = append(ops, &operand{name: name, lay: l, role: out})
	}
	return ops
}

// normals returns t normal floats of standard deviation sd.
func normals(rng *rand.Rand, t int, sd float64) []float32 {
	x := make([]float32, t)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * sd)
	}
	return x
}

// maxInputs returns k and kappa for t elements: normal pairs (mode
// "edges": ties, signed zeros, infinities and kappa's −Inf start among
// them).
func maxInputs(t int, mode string, rng *rand.Rand) (k, kappa []float32) {
	k, kappa = normals(rng, t, 3), normals(rng, t, 3)
	if mode == "edges" {
		inf := float32(math.Inf(1))
		for i := range t {
			switch i % 6 {
			case 0:
				kappa[i] = k[i]
			case 1:
				k[i], kappa[i] = float32(math.Copysign(0, -1)), 0
			case 2:
				k[i], kappa[i] = 0, float32(math.Copysign(0, -1))
			case 3:
				kappa[i] = -inf
			case 4:
				k[i] = inf
			}
		}
	}
	return k, kappa
}

var aftMaxTest = kernelTest{
	modes: []string{"random", "edges"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		l := perRow(t)
		k, kappa := maxInputs(t, mode, rng)
		w := newExpect("kappa", l)
		for i := range t {
			m := k[i]
			if kappa[i] > k[i] {
				m = kappa[i]
			}
			w.set(i, 0, float64(m), 0)
		}
		return scenario{
			ops: []*operand{{name: "k", lay: l, role: in, vals: k},
				{name: "kappa", lay: l, role: acc, vals: kappa}},
			want: map[string]*expect{"kappa": w},
		}
	},
}

// quotInputs returns num and den for t elements: den positive over many
// binades (mode "edges": aftTiny's 2⁻⁶⁰ and subnormal quotients among
// them), num the sums of smaller terms they are.
func quotInputs(t int, mode string, rng *rand.Rand) (num, den []float32) {
	num, den = normals(rng, t, 1), make([]float32, t)
	for i := range t {
		den[i] = float32(math.Exp(rng.NormFloat64() * 3))
		if mode == "edges" {
			den[i] = []float32{0x1p-60, 1e30, 1, 3, 0x1p-100}[i%5] * float32(1+rng.Float64())
			if i%7 == 0 {
				num[i] *= 0x1p-100
			}
		}
	}
	return num, den
}

var aftQuotTest = kernelTest{
	modes: []string{"random", "edges"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		l := perRow(t)
		num, den := quotInputs(t, mode, rng)
		w := newExpect("z", l)
		for i := range t {
			q := float64(num[i]) / float64(den[i])
			w.set(i, 0, q, u*math.Abs(q)+0x1p-126)
		}
		return scenario{
			ops:  flatOps(l, map[string][]float32{"num": num, "den": den}, []string{"num", "den"}, "z"),
			want: map[string]*expect{"z": w},
		}
	},
}

var aftFactorsTest = kernelTest{
	modes: []string{"random", "edges"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		l := perRow(t)
		k, kappa, v := normals(rng, t, 4), make([]float32, t), normals(rng, t, 1)
		for i := range t {
			kappa[i] = k[i] + float32(math.Abs(rng.NormFloat64()*4)) // κ ≥ k, as the running maximum
			if mode == "edges" {
				switch i % 5 {
				case 0: // flushed
					kappa[i] = k[i] + 100
				case 1: // clamped, e^88 ≈ 1.65e38: |v| < 2 keeps kv finite
					kappa[i] = k[i] - 100
					v[i] = float32(2*rng.Float64() - 1)
				case 2: // e^0
					kappa[i] = k[i]
				case 3: // e^−Inf
					k[i] = float32(math.Inf(-1))
				}
			}
		}
		wkv, wek := newExpect("kv", l), newExpect("ek", l)
		for i := range t {
			x := float64(k[i]) - float64(kappa[i]) // exact; the kernels round it to float32 first
			ek := math.Exp(math.Min(x, 88))
			tol := (4*u+u*math.Abs(x))*ek + 0x1p-126
			if math.IsInf(x, -1) {
				tol = 0
			}
			wek.set(i, 0, ek, tol)
			wkv.set(i, 0, ek*float64(v[i]), (tol+u*ek)*math.Abs(float64(v[i])))
		}
		return scenario{
			ops:  flatOps(l, map[string][]float32{"k": k, "kappa": kappa, "v": v}, []string{"k", "kappa", "v"}, "kv", "ek"),
			want: map[string]*expect{"kv": wkv, "ek": wek},
		}
	},
}

// quotBackInputs returns dz, z and den for t elements: den positive over
// many binades (mode "edges": 2⁻¹⁰⁰, aftTiny's 2⁻⁶⁰, up to 1e30).
func quotBackInputs(t int, mode string, rng *rand.Rand) (dz, z, den []float32) {
	dz, z, den = normals(rng, t, 1), normals(rng, t, 2), make([]float32, t)
	for i := range t {
		den[i] = float32(math.Exp(rng.NormFloat64() * 3))
		if mode == "edges" {
			den[i] = []float32{0x1p-60, 1e30, 1, 3, 0x1p-100}[i%5] * float32(1+rng.Float64())
		}
	}
	return dz, z, den
}

var aftQuotBackTest = kernelTest{
	modes: []string{"random", "edges"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		l := perRow(t)
		dz, z, den := quotBackInputs(t, mode, rng)
		wn, wd := newExpect("dnum", l), newExpect("dden", l)
		for i := range t {
			g, zz, dd := float64(dz[i]), float64(z[i]), float64(den[i])
			wn.set(i, 0, g/dd, 3*u*math.Abs(g/dd)+0x1p-126)
			wd.set(i, 0, -g*zz/dd, 4*u*math.Abs(g*zz/dd)+0x1p-126)
		}
		return scenario{
			ops:  flatOps(l, map[string][]float32{"dz": dz, "z": z, "den": den}, []string{"dz", "z", "den"}, "dnum", "dden"),
			want: map[string]*expect{"dnum": wn, "dden": wd},
		}
	},
}

// kvBackInputs returns ek, v, g1 and g2 for t elements: ek in (0, 1] as
// exponentials of non-positive numbers are (mode "edges": 0, 1 and
// subnormal factors among them).
func kvBackInputs(t int, mode string, rng *rand.Rand) (ek, v, g1, g2 []float32) {
	ek, v, g1, g2 = make([]float32, t), normals(rng, t, 1), normals(rng, t, 1), normals(rng, t, 1)
	for i := range t {
		ek[i] = float32(math.Exp(-math.Abs(rng.NormFloat64() * 5)))
		if mode == "edges" && i%2 == 0 {
			ek[i] = []float32{0, 1, 0x1p-130, 1e-30}[i/2%4]
		}
	}
	return ek, v, g1, g2
}

var aftKVBackTest = kernelTest{
	modes: []string{"random", "edges"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		l := perRow(t)
		ek, v, g1, g2 := kvBackInputs(t, mode, rng)
		wk, wv := newExpect("dk", l), newExpect("dv", l)
		for i := range t {
			e, vv, a, b := float64(ek[i]), float64(v[i]), float64(g1[i]), float64(g2[i])
			wv.set(i, 0, e*a, u*math.Abs(e*a)+0x1p-126)
			dk := e * (vv*a + b)
			wk.set(i, 0, dk, 2*u*e*(math.Abs(vv*a)+math.Abs(b))+u*math.Abs(dk)+0x1p-126)
		}
		return scenario{
			ops:  flatOps(l, map[string][]float32{"ek": ek, "v": v, "g1": g1, "g2": g2}, []string{"ek", "v", "g1", "g2"}, "dk", "dv"),
			want: map[string]*expect{"dk": wk, "dv": wv},
		}
	},
}

// aftFlatMutants are wrong element-wise passes the checks must catch.
var aftFlatMutants = []mutant{
	{"AFTFactors skips the last element", "AFTFactors", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			if a.t > 0 {
				a.t--
			}
			return ok(a)
		}
	}},
	{"AFTFactors without the clamp at 88", "AFTFactors", "edges", 11, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			r := ok(a)
			for i := range a.t {
				if a.s["k"][i]-a.s["kappa"][i] > 88 {
					a.s["ek"][i] = float32(math.Inf(1))
				}
			}
			return r
		}
	}},
	{"AFTFactors' kv from k", "AFTFactors", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			r := ok(a)
			for i := range a.t {
				a.s["kv"][i] = a.s["k"][i] * a.s["v"][i]
			}
			return r
		}
	}},
	{"AFTMax as a minimum", "AFTMax", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			k, kappa := a.s["k"], a.s["kappa"]
			for i := range a.t {
				kappa[i] = min(kappa[i], k[i])
			}
			return 0
		}
	}},
	{"AFTMax skips the last element (kappa −Inf there)", "AFTMax", "edges", 10, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			if a.t > 0 {
				a.t--
			}
			return ok(a)
		}
	}},
	{"AFTQuot through 1/den", "AFTQuot", "random", 33, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			for i := range a.t {
				a.s["z"][i] = a.s["num"][i] * (1 / a.s["den"][i])
			}
			return 0
		}
	}},
	{"AFTQuot skips the last element", "AFTQuot", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			if a.t > 0 {
				a.t--
			}
			return ok(a)
		}
	}},
	{"AFTQuotBack's dden without the minus", "AFTQuotBack", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			r := ok(a)
			for i := range a.t {
				a.s["dden"][i] = -a.s["dden"][i]
			}
			return r
		}
	}},
	{"AFTQuotBack off by 1e-6 relative", "AFTQuotBack", "edges", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			r := ok(a)
			for i := range a.t {
				a.s["dnum"][i] *= 1 + 1e-6
			}
			return r
		}
	}},
	{"AFTKVBack without g2", "AFTKVBack", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			r := ok(a)
			for i := range a.t {
				a.s["dk"][i] = a.s["ek"][i] * a.s["v"][i] * a.s["g1"][i]
			}
			return r
		}
	}},
	{"AFTKVBack skips the last element", "AFTKVBack", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			if a.t > 0 {
				a.t--
			}
			return ok(a)
		}
	}},
}

// TestAFTFlatMatchesGoLevel checks that every level's AFTMax, AFTQuot,
// AFTQuotBack and AFTKVBack give the Go level's bits, on random and edge
// inputs of 1000 elements (whole vectors and a tail). Skipped where the Go compiler may
// fuse AFTKVBack's v·g1 + g2 (GOAMD64 v3 and up).
func TestAFTFlatMatchesGoLevel(t *testing.T) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "GOAMD64" && s.Value >= "v3" {
				t.Skipf("GOAMD64=%s: the Go level may use FMA", s.Value)
			}
		}
	}
	same := func(a, b []float32) int {
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				return i
			}
		}
		return -1
	}
	for _, name := range kernels.Names() {
		spec, err := kernels.Spec(name)
		if err != nil {
			t.Fatal(err)
		}
		if spec.Variant != "aft_full" {
			continue
		}
		const n = 1000
		var dz, z, den, ek, v, g1, g2, k, kappa, num, qden []float32
		for _, mode := range []string{"random", "edges"} {
			a, b, c := quotBackInputs(n, mode, rngFor("quotBits", name, mode))
			dz, z, den = append(dz, a...), append(z, b...), append(den, c...)
			p, q, r, s := kvBackInputs(n, mode, rngFor("kvBits", name, mode))
			ek, v, g1, g2 = append(ek, p...), append(v, q...), append(g1, r...), append(g2, s...)
			x, y := maxInputs(n, mode, rngFor("maxBits", name, mode))
			k, kappa = append(k, x...), append(kappa, y...)
			x, y = quotInputs(n, mode, rngFor("quotFwdBits", name, mode))
			num, qden = append(num, x...), append(qden, y...)
		}
		var ref [6][]float32
		for _, s := range levelsOf(t, name) {
			if s.AFTMax == nil || s.AFTQuot == nil || s.AFTQuotBack == nil || s.AFTKVBack == nil {
				t.Fatalf("%s %s: no AFTMax, AFTQuot, AFTQuotBack or AFTKVBack", name, s.ISA)
			}
			var out [6][]float32
			for i := range out {
				out[i] = make([]float32, 2*n)
			}
			s.AFTQuotBack(2*n, dz, z, den, out[0], out[1])
			s.AFTKVBack(2*n, ek, v, g1, g2, out[2], out[3])
			copy(out[4], kappa)
			s.AFTMax(2*n, k, out[4])
			s.AFTQuot(2*n, num, qden, out[5])
			if s.ISA == kernels.Go {
				ref = out
				continue
			}
			for o, what := range []string{"dnum", "dden", "dk", "dv", "kappa", "z"} {
				if i := same(out[o], ref[o]); i >= 0 {
					t.Errorf("%s %s: %s[%d] = %g; the Go level gives %g", name, s.ISA, what, i, out[o][i], ref[o][i])
				}
			}
		}
	}
}
