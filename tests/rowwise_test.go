package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// The row-wise kernels (LayerNorm, LayerNormBack, LayerNormGrad, Gelu,
// GeluBack): their scenarios, float64 references and mutants. TestKernels
// runs them for every linked spec at every level this run allows, at
// t ∈ {0, 1, 2, 7, N, 2N+3} rows (t counts rows of a batch, so it may
// exceed N), through the harness: misaligned slices of exactly the length
// the kernel needs, NaN guards right after every region (an overrun reads
// a NaN into the results or writes a guard), outputs that start as NaN
// markers, accumulated outputs (dx, dgamma, dbeta) that start nonzero.
//
// Tolerances, with u = 2⁻²⁴ and L = D:
//   - LayerNorm: the mean before rounding may err by (2L+16)·u·mean|x − μ|
//     (the first pass's error is removed by the second, centred pass, up
//     to a second-order (2L+16)²·u²·mean|x|); mu adds its own rounding,
//     2u·|μ|. rs errs by (2L+32)·u relative (a centred sum of squares, a
//     square root, a division). y = x̂·γ + β inherits the mean's error times
//     rs·|γ| and rs's relative error times |x̂·γ|, plus a few roundings.
//   - LayerNormBack, LayerNormGrad: sumTol on each row (column) sum, plus a
//     few roundings of x̂ = (x − mu)·rs and of the products. The integer
//     mode of LayerNormGrad is exact in any order.
//   - Gelu: the rational tanh errs by at most 1.5e-6 absolute (Eigen
//     states 4e-7; the bound allows for float32 evaluation), and by
//     4·e^{−2|z|} where it saturates to ±1; z itself is rounded (8u|z|
//     relative, scaled by tanh' = 1 − tanh²). g = 0.5·x·(1 + tanh z) and
//     gelu' multiply that error by 0.5·|x| and by 0.5 + |x|·√(2/π)·(1 +
//     3·0.044715·x²) (∂gelu'/∂tanh); plus a few roundings of each. At
//     ±1e4 tanh saturates, so gelu = x or −0 and gelu' = 1 or 0 exactly
//     within a few u.
//   - GeluBack: one correctly rounded product (u relative; exact in the
//     integer mode).

func init() {
	for name, kt := range map[string]kernelTest{
		"LayerNorm":     layerNormTest,
		"LayerNormBack": layerNormBackTest,
		"LayerNormGrad": layerNormGradTest,
		"Gelu":          geluTest,
		"GeluBack":      geluBackTest,
	} {
		kt.lengths = rowLengths
		kernelTests[name] = kt
	}
	mutants = append(mutants, rowMutants...)
}

// rowLengths are the row counts the row-wise kernels are tested at.
func rowLengths(e *env) []int { return []int{0, 1, 2, 7, e.n, 2*e.n + 3} }

// rowsOf is t rows of w floats, stride w (contiguous).
func rowsOf(t, w int) layout { return layout{rows: t, stride: w, width: w} }

// perRow is one float per row (mu, rs).
func perRow(t int) layout { return layout{rows: t, stride: 1, width: 1} }

// lnEps is the LayerNorm's ε.
const lnEps = 1e-5

// lnRows fills a [t, D] matrix for the LayerNorm modes: "random" (normal),
// "offset" (rows of ±1e4 + noise of σ 1, every fourth row σ 0.05), and
// "constant" (every other row one value, 1e4 among them: variance 0; the
// others as "offset").
func lnRows(rng *rand.Rand, l layout, mode string) mat {
	if mode == "random" || mode == "integers" {
		return mixed(rng, l, 1)
	}
	m := newMat(l)
	consts := []float64{1e4, -3.25, 0, -1e4 + 0.5, 7}
	for r := 0; r < l.rows; r++ {
		off := 1e4 * float64(1-2*rng.IntN(2))
		sigma := 1.0
		if r%4 == 3 {
			sigma = 0.05
		}
		for c := 0; c < l.width; c++ {
			v := off + sigma*rng.NormFloat64()
			if mode == "constant" && r%2 == 0 {
				v = consts[(r/2)%len(consts)]
			}
			m.v[l.pos(r, c)] = float32(v)
		}
	}
	return m
}

// lnParams draws gamma (around 1) and beta.
func lnParams(rng *rand.Rand, d int) (gamma, beta mat) {
	gamma, beta = newMat(vecLayout(d)), mixed(rng, vecLayout(d), 1)
	for k := range gamma.v {
		gamma.v[k] = float32(1 + 0.5*rng.NormFloat64())
	}
	return gamma, beta
}

// lnStats is a row's mean, variance and the derived rs, in float64.
func lnStats(x []float64) (mean, variance, rs float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		variance += (v - mean) * (v - mean)
	}
	variance /= float64(len(x))
	return mean, variance, 1 / math.Sqrt(variance+lnEps)
}

// rowVals is row r of m in float64.
func rowVals(m mat, r int) []float64 {
	out := make([]float64, m.lay.width)
	for c := range out {
		out[c] = float64(m.at(r, c))
	}
	return out
}

// refLayerNorm: per row, mu = mean(x), rs = 1/√(var + ε), y = (x − mu)·rs·γ + β.
func refLayerNorm(t, d int, x, gamma, beta mat) (y, mu, rs *expect) {
	y, mu, rs = newExpect("y", rowsOf(t, d)), newExpect("mu", perRow(t)), newExpect("rs", perRow(t))
	L := float64(d)
	relRs := (2*L + 32) * u
	for r := 0; r < t; r++ {
		xs := rowVals(x, r)
		mean, _, rsv := lnStats(xs)
		var dev, abs float64
		for _, v := range xs {
			dev += math.Abs(v - mean)
			abs += math.Abs(v)
		}
		eMean := (2*L+16)*u*dev/L + (2*L+16)*(2*L+16)*u*u*abs/L
		mu.set(r, 0, mean, 2*u*math.Abs(mean)+eMean)
		rs.set(r, 0, rsv, relRs*rsv)
		for c, v := range xs {
			g, b := float64(gamma.v[c]), float64(beta.v[c])
			xh := (v - mean) * rsv
			yv := xh*g + b
			tol := math.Abs(g)*rsv*(eMean+2*u*math.Abs(v-mean)) + math.Abs(xh*g)*(relRs+6*u) + 2*u*math.Abs(b) + 2*u*math.Abs(yv)
			y.set(r, c, yv, tol)
		}
	}
	return y, mu, rs
}

// lnStatsOf returns mu and rs of every row as the forward stores them
// (float32), for the backward kernels' inputs.
func lnStatsOf(t int, x mat) (mu, rs mat) {
	mu, rs = newMat(perRow(t)), newMat(perRow(t))
	for r := 0; r < t; r++ {
		mean, _, rsv := lnStats(rowVals(x, r))
		mu.v[r], rs.v[r] = float32(mean), float32(rsv)
	}
	return mu, rs
}

var layerNormTest = kernelTest{
	modes: []string{"random", "offset", "constant"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		lx := rowsOf(t, e.d)
		x := lnRows(rng, lx, mode)
		gamma, beta := lnParams(rng, e.d)
		y, mu, rs := refLayerNorm(t, e.d, x, gamma, beta)
		return scenario{
			ops: []*operand{
				{name: "x", lay: lx, vals: x.v},
				{name: "gamma", lay: vecLayout(e.d), vals: gamma.v}, {name: "beta", lay: vecLayout(e.d), vals: beta.v},
				{name: "y", lay: lx, role: out}, {name: "mu", lay: perRow(t), role: out}, {name: "rs", lay: perRow(t), role: out},
			},
			want: map[string]*expect{"y": y, "mu": mu, "rs": rs},
		}
	},
}

// refLayerNormBack: per row, with x̂ = (x − mu)·rs and g = dy·γ,
// dx = dx0 + rs·(g − mean(g) − x̂·mean(g·x̂)).
func refLayerNormBack(t, d int, dy, x, mu, rs, gamma, dx0 mat) *expect {
	dx := newExpect("dx", rowsOf(t, d))
	L := float64(d)
	for r := 0; r < t; r++ {
		m, s := float64(mu.v[r]), float64(rs.v[r])
		xh, g := make([]float64, d), make([]float64, d)
		var sg, sgx, ag, agx float64
		for c := 0; c < d; c++ {
			xh[c] = (float64(x.at(r, c)) - m) * s
			g[c] = float64(dy.at(r, c)) * float64(gamma.v[c])
			sg += g[c]
			sgx += g[c] * xh[c]
			ag += math.Abs(g[c])
			agx += math.Abs(g[c] * xh[c])
		}
		mg, mgx := sg/L, sgx/L
		eMg := sumTol(d, ag)/L + 2*u*ag/L
		eMgx := sumTol(d, agx)/L + 6*u*agx/L
		for c := 0; c < d; c++ {
			d0 := float64(dx0.at(r, c))
			v := d0 + s*(g[c]-mg-xh[c]*mgx)
			mag := math.Abs(g[c]) + math.Abs(mg) + math.Abs(xh[c]*mgx)
			tol := s*(6*u*mag+eMg+math.Abs(xh[c])*eMgx) + 2*u*(math.Abs(v)+math.Abs(d0))
			dx.set(r, c, v, tol)
		}
	}
	return dx
}

var layerNormBackTest = kernelTest{
	modes: []string{"random", "offset", "constant"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		lx := rowsOf(t, e.d)
		x := lnRows(rng, lx, mode)
		mu, rs := lnStatsOf(t, x)
		dy, dx0 := mixed(rng, lx, 1), mixed(rng, lx, 1)
		gamma, _ := lnParams(rng, e.d)
		return scenario{
			ops: []*operand{
				{name: "dy", lay: lx, vals: dy.v}, {name: "x", lay: lx, vals: x.v},
				{name: "mu", lay: perRow(t), vals: mu.v}, {name: "rs", lay: perRow(t), vals: rs.v},
				{name: "gamma", lay: vecLayout(e.d), vals: gamma.v},
				{name: "dx", lay: lx, role: acc, vals: dx0.v},
			},
			want: map[string]*expect{"dx": refLayerNormBack(t, e.d, dy, x, mu, rs, gamma, dx0)},
		}
	},
}

// refLayerNormGrad: dgamma = dg0 + Σ_r dy·(x − mu)·rs, dbeta = db0 + Σ_r dy.
func refLayerNormGrad(t, d int, dy, x, mu, rs, dg0, db0 mat) (dg, db *expect) {
	dg, db = newExpect("dgamma", vecLayout(d)), newExpect("dbeta", vecLayout(d))
	for c := 0; c < d; c++ {
		var sg, sb, ag, ab float64
		for r := 0; r < t; r++ {
			xh := (float64(x.at(r, c)) - float64(mu.v[r])) * float64(rs.v[r])
			g := float64(dy.at(r, c))
			sg += g * xh
			sb += g
			ag += math.Abs(g * xh)
			ab += math.Abs(g)
		}
		g0, b0 := float64(dg0.v[c]), float64(db0.v[c])
		dg.set(0, c, g0+sg, sumTol(t, ag)+4*u*ag+u*(math.Abs(g0+sg)+math.Abs(g0)))
		db.set(0, c, b0+sb, sumTol(t, ab)+u*(math.Abs(b0+sb)+math.Abs(b0)))
	}
	return dg, db
}

var layerNormGradTest = kernelTest{
	modes: []string{"random", "offset", "integers"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		lx, lp := rowsOf(t, e.d), vecLayout(e.d)
		x := lnRows(rng, lx, mode)
		mu, rs := lnStatsOf(t, x)
		dy, dg0, db0 := mixed(rng, lx, 1), mixed(rng, lp, 1), mixed(rng, lp, 1)
		if mode == "integers" { // x̂ = (x − mu)·rs and every sum exact
			x, dy, dg0, db0 = ints(rng, lx, 3), ints(rng, lx, 3), ints(rng, lp, 3), ints(rng, lp, 3)
			mu = ints(rng, perRow(t), 2)
			for r := range rs.v {
				rs.v[r] = []float32{0.5, 1, 2}[rng.IntN(3)]
			}
		}
		dg, db := refLayerNormGrad(t, e.d, dy, x, mu, rs, dg0, db0)
		if mode == "integers" {
			exactly(dg, db)
		}
		return scenario{
			ops: []*operand{
				{name: "dy", lay: lx, vals: dy.v}, {name: "x", lay: lx, vals: x.v},
				{name: "mu", lay: perRow(t), vals: mu.v}, {name: "rs", lay: perRow(t), vals: rs.v},
				{name: "dgamma", lay: lp, role: acc, vals: dg0.v}, {name: "dbeta", lay: lp, role: acc, vals: db0.v},
			},
			want: map[string]*expect{"dgamma": dg, "dbeta": db},
		}
	},
}

// The GELU's constants: √(2/π) and the cubic's coefficient.
const (
	geluC = 0.7978845608028654
	geluA = 0.044715
)

// geluInputs draws the GELU's input: "random" (normal, σ 2.5, with exact
// zeros), "extreme" (±1e4 and ±30 with noise, and normal values).
func geluInputs(rng *rand.Rand, l layout, mode string) mat {
	if mode == "random" {
		return mixed(rng, l, 2.5)
	}
	m := newMat(l)
	for k := range m.v {
		switch rng.IntN(4) {
		case 0:
			m.v[k] = float32(1e4*float64(1-2*rng.IntN(2)) + 3*rng.NormFloat64())
		case 1:
			m.v[k] = float32(30*float64(1-2*rng.IntN(2)) + rng.NormFloat64())
		default:
			m.v[k] = float32(4 * rng.NormFloat64())
		}
	}
	return m
}

// refGelu: g = 0.5·x·(1 + tanh z) and gelu'(x), z = √(2/π)·(x + 0.044715·x³).
func refGelu(l layout, x mat) (g, gd *expect) {
	g, gd = newExpect("g", l), newExpect("u", l)
	for k, xv := range x.v {
		v := float64(xv)
		z := geluC * (v + geluA*v*v*v)
		th := math.Tanh(z)
		dt := math.Min(1.5e-6, 4*math.Exp(-2*math.Abs(z))) + 8*u*math.Abs(z)*(1-th*th)
		kk := geluC * (1 + 3*geluA*v*v)
		gv := 0.5 * v * (1 + th)
		part := 0.5 * v * (1 - th*th) * kk
		dv := 0.5*(1+th) + part
		r, c := l.coord(k)
		g.set(r, c, gv, 0.5*math.Abs(v)*dt+4*u*math.Abs(gv)+0x1p-140)
		gd.set(r, c, dv, (0.5+math.Abs(v)*kk)*dt+8*u*(0.5*(1+math.Abs(th))+math.Abs(part)))
	}
	return g, gd
}

var geluTest = kernelTest{
	modes: []string{"random", "extreme"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		l := rowsOf(t, e.ffn)
		x := geluInputs(rng, l, mode)
		g, gd := refGelu(l, x)
		return scenario{
			ops:  []*operand{{name: "u", lay: l, role: acc, vals: x.v}, {name: "g", lay: l, role: out}},
			want: map[string]*expect{"g": g, "u": gd},
		}
	},
}

var geluBackTest = kernelTest{
	modes: []string{"random", "integers"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		l := rowsOf(t, e.ffn)
		a, b := mixed(rng, l, 1), mixed(rng, l, 1)
		if mode == "integers" {
			a, b = ints(rng, l, 100), ints(rng, l, 100)
		}
		want := newExpect("a", l)
		for k := range a.v {
			p := float64(a.v[k]) * float64(b.v[k])
			want.v[k], want.tol[k] = p, u*math.Abs(p)
		}
		if mode == "integers" {
			exactly(want)
		}
		return scenario{
			ops:  []*operand{{name: "a", lay: l, role: acc, vals: a.v}, {name: "b", lay: l, vals: b.v}},
			want: map[string]*expect{"a": want},
		}
	},
}

// plainLayerNorm is a LayerNorm in plain Go with ε and the number of
// columns that enter the statistics as parameters, for the mutants.
func plainLayerNorm(e *env, a args, eps float64, statCols int) {
	d := e.d
	x, gamma, beta, y, mu, rs := a.s["x"], a.s["gamma"], a.s["beta"], a.s["y"], a.s["mu"], a.s["rs"]
	for r := 0; r < a.t; r++ {
		row := make([]float64, statCols)
		for c := range row {
			row[c] = float64(x[r*d+c])
		}
		mean, v, _ := lnStats(row)
		s := 1 / math.Sqrt(v+eps)
		mu[r], rs[r] = float32(mean), float32(s)
		for c := 0; c < d; c++ {
			y[r*d+c] = float32((float64(x[r*d+c])-mean)*s*float64(gamma[c]) + float64(beta[c]))
		}
	}
}

// plainGelu is the GELU in plain float32 Go on the first n floats, the
// tanh's clamp optional, for the mutants.
func plainGelu(u, g []float32, n int, clamp bool) {
	const c, a, lim = float32(geluC), float32(geluA), float32(7.90531110763549805)
	for i := 0; i < n; i++ {
		x := u[i]
		z := c * (x + a*x*x*x)
		if clamp {
			z = min(max(z, -lim), lim)
		}
		w := z * z // Eigen's rational tanh
		p := ((((((-2.76076847742355e-16*w+2.00018790482477e-13)*w-8.60467152213735e-11)*w+5.12229709037114e-08)*w+
			1.48572235717979e-05)*w+6.37261928875436e-04)*w + 4.89352455891786e-03) * z
		q := ((1.19825839466702e-06*w+1.18534705686654e-04)*w+2.26843463243900e-03)*w + 4.89352518554385e-03
		th := p / q
		g[i] = 0.5 * x * (1 + th)
		u[i] = 0.5*(1+th) + 0.5*x*(1-th*th)*c*(1+3*a*x*x)
	}
}

// rowMutants are wrong row-wise kernels the suite must catch (run by
// TestMutantsAreCaught on spec odd: D 36, FFN 144).
var rowMutants = []mutant{
	{"LayerNorm with ε = 1e-6", "LayerNorm", "constant", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 { plainLayerNorm(e, a, 1e-6, e.d); return 0 }
	}},
	{"LayerNorm statistics off by one column (last column dropped)", "LayerNorm", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 { plainLayerNorm(e, a, lnEps, e.d-1); return 0 }
	}},
	{"LayerNorm writes one float past y", "LayerNorm", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			ok(a)
			y := a.s["y"]
			y[:len(y)+1][len(y)] = 0
			return 0
		}
	}},
	{"LayerNorm uses E[x²] − E[x]² in float32", "LayerNorm", "offset", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			ok(a)
			d, x, rs := e.d, a.s["x"], a.s["rs"]
			for r := 0; r < a.t; r++ {
				var s, q float32
				for _, v := range x[r*d : r*d+d] {
					s += v
					q += v * v
				}
				m := s / float32(d)
				rs[r] = float32(1 / math.Sqrt(float64(max(q/float32(d)-m*m, 0))+lnEps))
			}
			return 0
		}
	}},
	{"LayerNormBack overwrites dx", "LayerNormBack", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			clear(a.s["dx"])
			return ok(a)
		}
	}},
	{"LayerNormGrad drops the last row", "LayerNormGrad", "integers", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			a.t--
			return ok(a)
		}
	}},
	{"Gelu without the tanh clamp", "Gelu", "extreme", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 { plainGelu(a.s["u"], a.s["g"], a.t*e.ffn, false); return 0 }
	}},
	{"Gelu misses the last element (off-by-one tail)", "Gelu", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			n, u, g := a.t*e.ffn, a.s["u"], a.s["g"]
			lu, lg := u[n-1], g[n-1]
			ok(a)
			u[n-1], g[n-1] = lu, lg
			return 0
		}
	}},
	{"GeluBack misses the last element (off-by-one tail)", "GeluBack", "integers", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			n := a.t * e.ffn
			last := a.s["a"][n-1]
			ok(a)
			a.s["a"][n-1] = last
			return 0
		}
	}},
}

// TestLayerNormGradAddsOnce checks LayerNormGrad's determinism contract at
// every level: the sums are formed from 0 and added once, so a call on
// nonzero dgamma and dbeta gives exactly their sum with the result of a
// call on zeros (rounded once), and two calls give the same bits.
func TestLayerNormGradAddsOnce(t *testing.T) {
	for _, name := range kernels.Names() {
		spec, err := kernels.Spec(name)
		if err != nil {
			t.Fatal(err)
		}
		e := envOf(spec)
		for _, s := range levelsOf(t, name) {
			rows := 2*e.n + 3
			rng := rngFor("addsOnce", name)
			lx := rowsOf(rows, e.d)
			x := lnRows(rng, lx, "random")
			mu, rs := lnStatsOf(rows, x)
			dy := mixed(rng, lx, 1)
			dg0, db0 := mixed(rng, vecLayout(e.d), 1e3), mixed(rng, vecLayout(e.d), 1e3)
			run := func(g0, b0 []float32) (dg, db []float32) {
				dg, db = append([]float32(nil), g0...), append([]float32(nil), b0...)
				s.LayerNormGrad(rows, dy.v, x.v, mu.v, rs.v, dg, db)
				return dg, db
			}
			zg, zb := run(make([]float32, e.d), make([]float32, e.d))
			g1, b1 := run(dg0.v, db0.v)
			g2, b2 := run(dg0.v, db0.v)
			for c := 0; c < e.d; c++ {
				wantG, wantB := dg0.v[c]+zg[c], db0.v[c]+zb[c]
				if g1[c] != wantG || b1[c] != wantB {
					t.Errorf("%s %s: column %d: dgamma %g, dbeta %g; want %g, %g (dg0 + sums from 0, one rounding)",
						name, s.ISA, c, g1[c], b1[c], wantG, wantB)
					break
				}
				if math.Float32bits(g1[c]) != math.Float32bits(g2[c]) || math.Float32bits(b1[c]) != math.Float32bits(b2[c]) {
					t.Errorf("%s %s: column %d: two calls differ", name, s.ISA, c)
					break
				}
			}
		}
	}
}

// TestRowKernelsCheckLengths checks that the row-wise kernels accept any
// t ≥ 0 (not only t ≤ N) and that their wrappers reject slices too short
// for t rows.
func TestRowKernelsCheckLengths(t *testing.T) {
	for _, name := range kernels.Names() {
		spec, err := kernels.Spec(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range levelsOf(t, name) {
			rows := 3*spec.N + 1
			a, b := make([]float32, rows*spec.FFN), make([]float32, rows*spec.FFN)
			s.GeluBack(rows, a, b) // beyond N: fine
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s %s: GeluBack accepted %d floats for %d rows", name, s.ISA, len(a)-1, rows)
					}
				}()
				s.GeluBack(rows, a[:len(a)-1], b)
			}()
			func() {
				defer func() {
					if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "LayerNorm: len(rs)") {
						t.Errorf("%s %s: LayerNorm with a short rs: panic %v", name, s.ISA, p)
					}
				}()
				x := make([]float32, 2*spec.D)
				s.LayerNorm(2, x, x[:spec.D], x[:spec.D], make([]float32, 2*spec.D), make([]float32, 2), make([]float32, 1))
			}()
		}
	}
}

// TestGeluMatchesGoLevel checks that the assembly GELU repeats the Go
// level's float32 operations exactly (gen/asmgen/rows.go): the same bits
// for g and gelu' at every level, ordinary and extreme inputs alike. Skipped
// when the Go compiler may fuse multiply-adds (GOAMD64 v3 and up), which
// changes the Go level's rounding.
func TestGeluMatchesGoLevel(t *testing.T) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "GOAMD64" && s.Value >= "v3" {
				t.Skipf("GOAMD64=%s: the Go level may use FMA", s.Value)
			}
		}
	}
	for _, name := range kernels.Names() {
		spec, err := kernels.Spec(name)
		if err != nil {
			t.Fatal(err)
		}
		rows := 7
		l := rowsOf(rows, spec.FFN)
		var x []float32
		for _, mode := range []string{"random", "extreme"} {
			x = append(x, geluInputs(rngFor("geluBits", name, mode), l, mode).v...)
		}
		var goG, goU []float32
		for _, s := range levelsOf(t, name) {
			u, g := append([]float32(nil), x...), make([]float32, len(x))
			s.Gelu(2*rows, u, g)
			if s.ISA == kernels.Go {
				goG, goU = g, u
				continue
			}
			for i := range x {
				if math.Float32bits(g[i]) != math.Float32bits(goG[i]) || math.Float32bits(u[i]) != math.Float32bits(goU[i]) {
					t.Errorf("%s %s: gelu(%g) = %g, gelu' %g; the Go level gives %g, %g", name, s.ISA, x[i], g[i], u[i], goG[i], goU[i])
					break
				}
			}
		}
	}
}
