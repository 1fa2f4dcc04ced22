package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// Tests of the attention-free kernels (AFTFull, AFTLocal, AFTConv,
// AFTSimple and their backwards) and of linear attention (Linear,
// LinearBack), causal or, for a bidirectional spec ("causal": false),
// unmasked: the references then sum over every key j < t (every row i < t
// in the backward), aft_local's and aft_conv's window is |i − j| < S and
// aft_conv's u has 2S − 1 entries, u[i − j + S − 1].
//
//   - The kernels join the repository-wide TestKernels: init registers them
//     in kernelTests, so every level runs at t ∈ {1, 2, 7, 15, n−1, n} in the
//     harness's guarded, misaligned buffers (a middle head, other heads'
//     columns as guards), against float64 references written from the
//     model card's formulas as plain O(t²) sums, with inputs of ordinary
//     size and with logits of ±30 and ±1e4.
//   - TestAFTGradients checks the backward kernels, and the references'
//     analytic gradients, against central differences of the float64
//     forward reference.
//   - TestAFTRelations checks relations the formulas imply between
//     variants: aft_local with window 1 and w_ii = 0 is aft_simple, with
//     window n it is aft_full, aft_local is aft_full with w = 0 outside the
//     window (not −∞), and aft_conv is aft_local with w[i,j] = u[i−j].
//   - TestAFTCatchesPublicBugs runs the bugs of public implementations
//     (variants-notes.md) through the same scenarios: each must be caught.
//
// Tolerances. A float32 kernel forms each exponent k_j + b_ij − m_i in
// float32: when the inputs are on a 1/64 grid below 2¹⁶ (the ±30 and ±1e4
// modes) that is exact, otherwise it errs by up to 2u·(|k|+|b|+|m|), which
// the references add per term (aftDelta). On top, (8L+64)·u relative for a
// sum of L terms: the exponentials' few ulps, the rescalings of the running
// sums (one exponential per step) and the summation. A wrong term (one key
// too many or too few, a −∞ instead of 0) changes an output by about 1/L of
// its size, far more than that at L ≤ 1024.

func init() {
	for _, f := range []string{"AFTFull", "AFTLocal", "AFTConv", "AFTSimple"} {
		kernelTests[f] = aftForwardTest()
		kernelTests[f+"Back"] = aftBackTest()
	}
	kernelTests["Linear"] = linearTest()
	kernelTests["LinearBack"] = linearBackTest()
}

// aftGeom is an AFT kernel's bias structure and sizes.
type aftGeom struct {
	mode string // "full", "local", "conv" or "simple"
	s    int    // window (local, conv)
	bi   bool   // unmasked: every row sees every key j < t
}

// keys is the range [lo, hi) of the keys row i sees at length t.
func (g aftGeom) keys(i, t int) (lo, hi int) {
	if g.bi {
		return 0, t
	}
	return 0, i + 1
}

// rows is the range [lo, hi) of the rows that see key j at length t.
func (g aftGeom) rows(j, t int) (lo, hi int) {
	if g.bi {
		return 0, t
	}
	return j, t
}

// uLen is the length of a head's row of aft_conv's u.
func (g aftGeom) uLen() int {
	if g.bi {
		return 2*g.s - 1
	}
	return g.s
}

// uPairs is the number of (i, j), i, j < t, whose bias is u[l].
func (g aftGeom) uPairs(l, t int) int {
	off := l
	if g.bi {
		off = l - (g.s - 1)
		if off < 0 {
			off = -off
		}
	}
	return max(t-off, 1)
}

// wLayout is w's (and dw's) layout at length t: the causal triangle, or
// the [t, t] block.
func (e *env) wLayout(t int) layout {
	if e.bidi {
		return layout{rows: t, stride: e.n, width: t}
	}
	return triangle(t, e.n)
}

func aftGeomOf(e *env, field string) aftGeom {
	spec, err := kernels.Spec(e.name)
	if err != nil {
		panic(err)
	}
	bi := spec.Bidirectional
	switch {
	case strings.HasPrefix(field, "AFTFull"):
		return aftGeom{mode: "full", bi: bi}
	case strings.HasPrefix(field, "AFTLocal"):
		return aftGeom{mode: "local", s: spec.Window, bi: bi}
	case strings.HasPrefix(field, "AFTConv"):
		return aftGeom{mode: "conv", s: spec.Window, bi: bi}
	}
	return aftGeom{mode: "simple", bi: bi}
}

// aftData are an AFT kernel's inputs in float64, dense: k, v [t][dh],
// w [t][t] (full, local), u [s] (conv).
type aftData struct {
	t, dh   int
	k, v, w []float64
	u       []float64
}

// bias returns b_ij (a key j row i sees) and whether it is a learned
// parameter entry (false: the card's 0 outside the window).
func (g aftGeom) bias(d *aftData, i, j int) (float64, bool) {
	dist := i - j
	if g.bi && dist < 0 {
		dist = -dist
	}
	switch g.mode {
	case "full":
		return d.w[i*d.t+j], true
	case "local":
		if dist < g.s {
			return d.w[i*d.t+j], true
		}
	case "conv":
		if dist < g.s {
			return d.u[g.uIndex(i, j)], true
		}
	}
	return 0, false
}

// uIndex is the index in u of b_ij inside aft_conv's window.
func (g aftGeom) uIndex(i, j int) int {
	if g.bi {
		return i - j + g.s - 1
	}
	return i - j
}

// aftForward64 is the model card's formula as written, in float64, without
// the σ(Q) gate: for row i and channel c, with e_j = k_j + b_ij,
// m = max_j e_j, den = Σ_j exp(e_j − m) and z = Σ_j exp(e_j − m)·v_j / den
// over the keys j row i sees (j ≤ i; unmasked j < t).
func aftForward64(g aftGeom, d *aftData) (z, m, den []float64) {
	t, dh := d.t, d.dh
	z, m, den = make([]float64, t*dh), make([]float64, t*dh), make([]float64, t*dh)
	e := make([]float64, t)
	for i := 0; i < t; i++ {
		lo, hi := g.keys(i, t)
		for c := 0; c < dh; c++ {
			mx := math.Inf(-1)
			for j := lo; j < hi; j++ {
				b, _ := g.bias(d, i, j)
				e[j] = d.k[j*dh+c] + b
				mx = math.Max(mx, e[j])
			}
			var s, num float64
			for j := lo; j < hi; j++ {
				p := math.Exp(e[j] - mx)
				s += p
				num += p * d.v[j*dh+c]
			}
			z[i*dh+c], m[i*dh+c], den[i*dh+c] = num/s, mx, s
		}
	}
	return z, m, den
}

// aftBackward64 is the backward contract of runtime/kernels with the given
// statistics (z, m, rd) and output gradient dz: p_ij = exp(k_j + b_ij −
// m_i)·rd_i, g_ij = p_ij·dz_i·(v_j − z_i), dv_j = Σ_i p_ij dz_i,
// dk_j = Σ_i g_ij over the rows i that see key j (i ≥ j; unmasked i < t),
// and Σ_c g_ij into dw[i][j] (full, local: in the window) or du (conv).
func aftBackward64(g aftGeom, d *aftData, z, m, rd, dz []float64) (dk, dv, dw, du []float64) {
	t, dh := d.t, d.dh
	dk, dv, dw, du = make([]float64, t*dh), make([]float64, t*dh), make([]float64, t*t), make([]float64, max(g.uLen(), 1))
	for j := 0; j < t; j++ {
		lo, hi := g.rows(j, t)
		for c := 0; c < dh; c++ {
			for i := lo; i < hi; i++ {
				b, learned := g.bias(d, i, j)
				p := math.Exp(d.k[j*dh+c]+b-m[i*dh+c]) * rd[i*dh+c]
				pd := p * dz[i*dh+c]
				gg := pd * (d.v[j*dh+c] - z[i*dh+c])
				dv[j*dh+c] += pd
				dk[j*dh+c] += gg
				if learned {
					if g.mode == "conv" {
						du[g.uIndex(i, j)] += gg
					} else {
						dw[i*t+j] += gg
					}
				}
			}
		}
	}
	return dk, dv, dw, du
}

// aftOnGrid reports whether x is a multiple of 1/64 below 2¹⁶: sums and
// differences of such values are exact in float32.
func aftOnGrid(x float64) bool {
	y := x * 64
	return y == math.Round(y) && math.Abs(x) < 65536
}

// aftDelta bounds the error of forming k + b − m in float32.
func aftDelta(k, b, m float64) float64 {
	if aftOnGrid(k) && aftOnGrid(b) && aftOnGrid(m) {
		return 0
	}
	return 2 * u * (math.Abs(k) + math.Abs(b) + math.Abs(m))
}

// aftRel is the relative error allowed on a sum of L exponential terms.
func aftRel(L int) float64 { return float64(8*L+64) * u }

// aftHeadVals reads a head-layout mat into a dense [t][dh] float64 slice.
func aftHeadVals(m mat, t, dh int) []float64 {
	out := make([]float64, t*dh)
	for i := 0; i < t; i++ {
		for c := 0; c < dh; c++ {
			out[i*dh+c] = float64(m.at(i, c))
		}
	}
	return out
}

// aftTriVals reads w's entries row i sees (a causal triangle, or the
// [t, t] block) into a dense [t][t] slice (0 elsewhere).
func aftTriVals(g aftGeom, m mat, t int) []float64 {
	out := make([]float64, t*t)
	for i := 0; i < t; i++ {
		lo, hi := g.keys(i, t)
		for j := lo; j < hi; j++ {
			out[i*t+j] = float64(m.at(i, j))
		}
	}
	return out
}

// aftULayout is head e.h's row of the [Heads, s] parameter u.
func (e *env) aftULayout(s int) layout {
	return layout{rows: 1, stride: e.heads * s, width: s, col: e.h * s}
}

// aftQuantize rounds x to the 1/64 grid.
func aftQuantize(x float64) float32 { return float32(math.Round(x*64) / 64) }

// aftDraw draws one logit-like input (k, w, u) for a mode: "random"
// (normal, σ 2), "pm30" and "pm1e4" (±30 or ±1e4 in a third of the entries
// each, the rest normal with σ 3, all on the 1/64 grid).
func aftDraw(rng *rand.Rand, mode string) float32 {
	big := 30.0
	switch mode {
	case "random":
		return float32(rng.NormFloat64() * 2)
	case "pm1e4":
		big = 1e4
	}
	switch rng.IntN(3) {
	case 0:
		return aftQuantize(big + rng.NormFloat64()*3)
	case 1:
		return aftQuantize(-big + rng.NormFloat64()*3)
	}
	return aftQuantize(rng.NormFloat64() * 3)
}

// aftIn are the forward inputs of one scenario, as mats and as aftData.
type aftIn struct {
	k, v, w, uw mat
	d           *aftData
}

// makeAFTIn draws the inputs. For aft_local, w is NaN outside the
// window: those entries must not be read (the bias there is 0).
func makeAFTIn(e *env, g aftGeom, t int, mode string, rng *rand.Rand) aftIn {
	lh := e.head(t)
	in := aftIn{k: newMat(lh), v: mixed(rng, lh, 1)}
	for x := range in.k.v {
		in.k.v[x] = aftDraw(rng, mode)
	}
	in.d = &aftData{t: t, dh: e.dh, k: aftHeadVals(in.k, t, e.dh), v: aftHeadVals(in.v, t, e.dh)}
	switch g.mode {
	case "full", "local":
		in.w = newMat(e.wLayout(t))
		in.d.w = make([]float64, t*t)
		for i := 0; i < t; i++ {
			lo, hi := g.keys(i, t)
			for j := lo; j < hi; j++ {
				x := aftDraw(rng, mode)
				in.d.w[i*t+j] = float64(x)
				if _, learned := g.bias(in.d, i, j); !learned {
					x = float32(math.NaN())
				}
				in.w.v[in.w.lay.pos(i, j)] = x
			}
		}
		in.d.w = aftTriVals(g, in.w, t)
	case "conv":
		in.uw = newMat(e.aftULayout(g.uLen()))
		for l := range in.uw.v {
			in.uw.v[l] = aftDraw(rng, mode)
		}
		in.d.u = make([]float64, g.uLen())
		for l := range in.d.u {
			in.d.u[l] = float64(in.uw.v[l])
		}
	}
	return in
}

// ops lists the forward inputs as harness operands.
func (in aftIn) ops(g aftGeom) []*operand {
	ops := []*operand{{name: "k", lay: in.k.lay, vals: in.k.v}, {name: "v", lay: in.v.lay, vals: in.v.v}}
	switch g.mode {
	case "full", "local":
		ops = append(ops, &operand{name: "w", lay: in.w.lay, vals: in.w.v})
	case "conv":
		ops = append(ops, &operand{name: "u", lay: in.uw.lay, vals: in.uw.v})
	}
	return ops
}

// refAFT is the forward reference with tolerances: z, m and rd = 1/den.
// m must be exactly the float32 rounding of the maximum (it is the maximum
// of the float32 sums k_j + b_ij).
func refAFT(g aftGeom, d *aftData, lh layout) (z, m, rd *expect) {
	zz, mm, den := aftForward64(g, d)
	z, m, rd = newExpect("z", lh), newExpect("m", lh), newExpect("rd", lh)
	for i := 0; i < d.t; i++ {
		for c := 0; c < d.dh; c++ {
			x := i*d.dh + c
			var errw, magv float64
			lo, hi := g.keys(i, d.t)
			for j := lo; j < hi; j++ {
				b, _ := g.bias(d, i, j)
				p := math.Exp(d.k[j*d.dh+c] + b - mm[x])
				errw += p * aftDelta(d.k[j*d.dh+c], b, mm[x])
				magv += p * math.Abs(d.v[j*d.dh+c])
			}
			rel := errw/den[x] + aftRel(hi-lo)
			z.set(i, c, zz[x], rel*(magv/den[x]+math.Abs(zz[x]))+0x1p-120)
			m.set(i, c, mm[x], math.Abs(float64(float32(mm[x]))-mm[x]))
			rd.set(i, c, 1/den[x], rel/den[x])
		}
	}
	return z, m, rd
}

func aftForwardTest() kernelTest {
	return kernelTest{
		modes: []string{"random", "pm30", "pm1e4"},
		scenario: func(e *env, field string, t int, mode string, rng *rand.Rand) scenario {
			g := aftGeomOf(e, field)
			in := makeAFTIn(e, g, t, mode, rng)
			lh := e.head(t)
			z, m, rd := refAFT(g, in.d, lh)
			ops := append(in.ops(g),
				&operand{name: "z", lay: lh, role: out},
				&operand{name: "m", lay: lh, role: out},
				&operand{name: "rd", lay: lh, role: out})
			return scenario{ops: ops, want: map[string]*expect{"z": z, "m": m, "rd": rd}}
		},
	}
}

// aftStats rounds the float64 forward's z, m and 1/den to float32 mats: the
// statistics a forward kernel hands its backward.
func aftStats(lh layout, z, m, den []float64, dh int) (zm, mm, rdm mat) {
	zm, mm, rdm = newMat(lh), newMat(lh), newMat(lh)
	for i := 0; i < lh.rows; i++ {
		for c := 0; c < dh; c++ {
			x := i*dh + c
			zm.v[lh.pos(i, c)] = float32(z[x])
			mm.v[lh.pos(i, c)] = float32(m[x])
			rdm.v[lh.pos(i, c)] = float32(1 / den[x])
		}
	}
	return zm, mm, rdm
}

// refAFTBack is the backward reference with tolerances, for the given
// float32 statistics; dw0/du0 are the accumulators' initial values. Bias
// entries the kernel must not touch (outside the window) expect their
// initial value exactly.
func refAFTBack(g aftGeom, d *aftData, zm, mm, rdm, dzm mat, dw0, du0 mat, lh layout) (dk, dv, dw, du *expect) {
	t, dh := d.t, d.dh
	z, m, rd, dz := aftHeadVals(zm, t, dh), aftHeadVals(mm, t, dh), aftHeadVals(rdm, t, dh), aftHeadVals(dzm, t, dh)
	gk, gv, gw, gu := aftBackward64(g, d, z, m, rd, dz)
	dk, dv = newExpect("dk", lh), newExpect("dv", lh)
	wMag, wErr := make([]float64, t*t), make([]float64, t*t)
	uMag, uErr := make([]float64, len(gu)), make([]float64, len(gu))
	for j := 0; j < t; j++ {
		lo, hi := g.rows(j, t)
		rel := aftRel(hi - lo)
		for c := 0; c < dh; c++ {
			var tv, tk float64
			for i := lo; i < hi; i++ {
				b, learned := g.bias(d, i, j)
				x := i*dh + c
				pd := math.Abs(math.Exp(d.k[j*dh+c]+b-m[x]) * rd[x] * dz[x])
				dl := aftDelta(d.k[j*dh+c], b, m[x])
				tv += pd * (dl + rel)
				mg := pd * (math.Abs(d.v[j*dh+c]) + math.Abs(z[x]))
				tk += mg * (dl + rel)
				if learned {
					if g.mode == "conv" {
						uMag[g.uIndex(i, j)] += mg
						uErr[g.uIndex(i, j)] += mg * dl
					} else {
						wMag[i*t+j] += mg
						wErr[i*t+j] += mg * dl
					}
				}
			}
			dv.set(j, c, gv[j*dh+c], tv+0x1p-120)
			dk.set(j, c, gk[j*dh+c], tk+0x1p-120)
		}
	}
	switch g.mode {
	case "full", "local":
		dw = newExpect("dw", dw0.lay)
		for i := 0; i < t; i++ {
			lo, hi := g.keys(i, t)
			for j := lo; j < hi; j++ {
				w0 := float64(dw0.at(i, j))
				if _, learned := g.bias(d, i, j); !learned {
					dw.set(i, j, w0, 0)
					continue
				}
				v := w0 + gw[i*t+j]
				dw.set(i, j, v, wErr[i*t+j]+wMag[i*t+j]*float64(2*dh+64)*u+aftBlockAdds(dh)*u*(math.Abs(w0)+wMag[i*t+j])+0x1p-120)
			}
		}
	case "conv":
		du = newExpect("du", du0.lay)
		for l := 0; l < g.uLen(); l++ {
			u0 := float64(du0.at(0, l))
			v := u0 + gu[l]
			np := g.uPairs(l, t)
			du.set(0, l, v, uErr[l]+uMag[l]*float64(2*dh*np+64)*u+float64(np)*aftBlockAdds(dh)*u*(math.Abs(u0)+uMag[l])+0x1p-120)
		}
	}
	return dk, dv, dw, du
}

// aftBlockAdds is the number of roundings a bias-gradient entry may take as
// it accumulates: a kernel that works on the head's channels in blocks adds
// each block's partial sum separately (at most one block per 8 channels),
// plus one.
func aftBlockAdds(dh int) float64 { return float64((dh+7)/8 + 1) }

func aftBackTest() kernelTest {
	return kernelTest{
		modes: []string{"random", "pm30", "pm1e4"},
		scenario: func(e *env, field string, t int, mode string, rng *rand.Rand) scenario {
			g := aftGeomOf(e, field)
			in := makeAFTIn(e, g, t, mode, rng)
			lh := e.head(t)
			z, m, den := aftForward64(g, in.d)
			zm, mm, rdm := aftStats(lh, z, m, den, e.dh)
			dzm := mixed(rng, lh, 1)
			ops := append(in.ops(g),
				&operand{name: "z", lay: lh, vals: zm.v},
				&operand{name: "m", lay: lh, vals: mm.v},
				&operand{name: "rd", lay: lh, vals: rdm.v},
				&operand{name: "dz", lay: lh, vals: dzm.v},
				&operand{name: "dk", lay: lh, role: out},
				&operand{name: "dv", lay: lh, role: out})
			var dw0, du0 mat
			switch g.mode {
			case "full", "local":
				dw0 = mixed(rng, e.wLayout(t), 1)
				ops = append(ops, &operand{name: "dw", lay: dw0.lay, role: acc, vals: dw0.v})
			case "conv":
				du0 = mixed(rng, e.aftULayout(g.uLen()), 1)
				ops = append(ops, &operand{name: "du", lay: du0.lay, role: acc, vals: du0.v})
			}
			dk, dv, dw, du := refAFTBack(g, in.d, zm, mm, rdm, dzm, dw0, du0, lh)
			want := map[string]*expect{"dk": dk, "dv": dv}
			if dw != nil {
				want["dw"] = dw
			}
			if du != nil {
				want["du"] = du
			}
			return scenario{ops: ops, want: want}
		},
	}
}

// linData are linear attention's inputs in float64, dense [t][dh].
type linData struct {
	t, dh     int
	fq, fk, v []float64
	bi        bool // unmasked: S and z sum over every j < t
}

// keys is the range [lo, hi) of the keys row i sees.
func (d *linData) keys(i int) (lo, hi int) {
	if d.bi {
		return 0, d.t
	}
	return 0, i + 1
}

// rows is the range [lo, hi) of the rows that see key j.
func (d *linData) rows(j int) (lo, hi int) {
	if d.bi {
		return 0, d.t
	}
	return j, d.t
}

// linForward64 is the card's formula as written: y_i = Σ_j
// (fq_i·fk_j)·v_j / (Σ_j fq_i·fk_j + 1e-6), i.e. φ(Q_i)ᵀS_i /
// (φ(Q_i)ᵀz_i + 1e-6), over j ≤ i (unmasked: j < t); it returns y and the
// denominators.
func linForward64(d *linData) (y, den []float64) {
	t, dh := d.t, d.dh
	y, den = make([]float64, t*dh), make([]float64, t)
	for i := 0; i < t; i++ {
		lo, hi := d.keys(i)
		s := make([]float64, hi)
		for j := lo; j < hi; j++ {
			for p := 0; p < dh; p++ {
				s[j] += d.fq[i*dh+p] * d.fk[j*dh+p]
			}
			den[i] += s[j]
		}
		den[i] += 1e-6
		for c := 0; c < dh; c++ {
			var num float64
			for j := lo; j < hi; j++ {
				num += s[j] * d.v[j*dh+c]
			}
			y[i*dh+c] = num / den[i]
		}
	}
	return y, den
}

// linBackward64 is LinearBackFunc's contract with the given y and rd:
// with a_i = rd_i·dy_i, b_i = −rd_i·(dy_i·y_i) and A_ij = a_i·v_j + b_i,
// dfq_i = Σ_{j≤i} A_ij fk_j, dfk_j = Σ_{i≥j} A_ij fq_i and
// dv_j = Σ_{i≥j} (fq_i·fk_j)·a_i (unmasked: over all i, j < t). It also returns, per output, the sum of
// the terms' absolute values.
func linBackward64(d *linData, y, rd, dy []float64) (dfq, dfk, dv, mq, mk, mv []float64) {
	t, dh := d.t, d.dh
	dfq, dfk, dv = make([]float64, t*dh), make([]float64, t*dh), make([]float64, t*dh)
	mq, mk, mv = make([]float64, t*dh), make([]float64, t*dh), make([]float64, t*dh)
	for i := 0; i < t; i++ {
		var bi, bm float64
		for c := 0; c < dh; c++ {
			bi -= rd[i] * dy[i*dh+c] * y[i*dh+c]
			bm += math.Abs(rd[i] * dy[i*dh+c] * y[i*dh+c])
		}
		lo, hi := d.keys(i)
		for j := lo; j < hi; j++ {
			A, Am, s := bi, bm, 0.0
			for c := 0; c < dh; c++ {
				a := rd[i] * dy[i*dh+c] * d.v[j*dh+c]
				A += a
				Am += math.Abs(a)
			}
			for p := 0; p < dh; p++ {
				s += d.fq[i*dh+p] * d.fk[j*dh+p]
				dfq[i*dh+p] += A * d.fk[j*dh+p]
				mq[i*dh+p] += Am * math.Abs(d.fk[j*dh+p])
				dfk[j*dh+p] += A * d.fq[i*dh+p]
				mk[j*dh+p] += Am * math.Abs(d.fq[i*dh+p])
			}
			for c := 0; c < dh; c++ {
				x := s * rd[i] * dy[i*dh+c]
				dv[j*dh+c] += x
				mv[j*dh+c] += math.Abs(x)
			}
		}
	}
	return dfq, dfk, dv, mq, mk, mv
}

// linRel is the relative error allowed on linear attention's sums over L
// rows of DH-wide products (all positive apart from v and dy).
func linRel(L, dh int) float64 { return float64(4*(L+dh)+32) * u }

// linRDLayout is column h of a [t, Heads] matrix.
func (e *env) linRDLayout(t int) layout { return layout{rows: t, stride: e.heads, width: 1, col: e.h} }

// linInputs draws fq = φ(x), fk = φ(x) (φ = elu + 1) and v: "random" with
// x ~ N(0, 1), "wide" with positive features spread over 1e-3 … 1e3.
func linInputs(e *env, t int, mode string, rng *rand.Rand) (fq, fk, v mat, d *linData) {
	lh := e.head(t)
	fq, fk, v = newMat(lh), newMat(lh), mixed(rng, lh, 1)
	feat := func() float32 {
		if mode == "wide" {
			return float32(math.Exp(rng.NormFloat64() * 2.3))
		}
		x := rng.NormFloat64()
		if x > 0 {
			return float32(x + 1)
		}
		return float32(math.Exp(x))
	}
	for k := range fq.v {
		fq.v[k], fk.v[k] = feat(), feat()
	}
	d = &linData{t: t, dh: e.dh, fq: aftHeadVals(fq, t, e.dh), fk: aftHeadVals(fk, t, e.dh), v: aftHeadVals(v, t, e.dh), bi: e.bidi}
	return fq, fk, v, d
}

func linearTest() kernelTest {
	return kernelTest{
		modes: []string{"random", "wide"},
		scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
			fq, fk, v, d := linInputs(e, t, mode, rng)
			lh, lr := e.head(t), e.linRDLayout(t)
			y, den := linForward64(d)
			ye, rde := newExpect("y", lh), newExpect("rd", lr)
			for i := 0; i < t; i++ {
				lo, hi := d.keys(i)
				rel := linRel(hi-lo, e.dh)
				rde.set(i, 0, 1/den[i], rel/den[i])
				for c := 0; c < e.dh; c++ {
					var mag float64
					for j := lo; j < hi; j++ {
						var s float64
						for p := 0; p < e.dh; p++ {
							s += d.fq[i*e.dh+p] * d.fk[j*e.dh+p]
						}
						mag += s * math.Abs(d.v[j*e.dh+c])
					}
					ye.set(i, c, y[i*e.dh+c], rel*(mag/den[i]+math.Abs(y[i*e.dh+c]))+0x1p-120)
				}
			}
			return scenario{
				ops: []*operand{
					{name: "fq", lay: lh, vals: fq.v}, {name: "fk", lay: lh, vals: fk.v}, {name: "v", lay: lh, vals: v.v},
					{name: "y", lay: lh, role: out}, {name: "rd", lay: lr, role: out},
				},
				want: map[string]*expect{"y": ye, "rd": rde},
			}
		},
	}
}

func linearBackTest() kernelTest {
	return kernelTest{
		modes: []string{"random", "wide"},
		scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
			fq, fk, v, d := linInputs(e, t, mode, rng)
			lh, lr := e.head(t), e.linRDLayout(t)
			y64, den := linForward64(d)
			ym, rdm := newMat(lh), newMat(lr)
			for i := 0; i < t; i++ {
				rdm.v[lr.pos(i, 0)] = float32(1 / den[i])
				for c := 0; c < e.dh; c++ {
					ym.v[lh.pos(i, c)] = float32(y64[i*e.dh+c])
				}
			}
			dym := mixed(rng, lh, 1)
			rd := make([]float64, t)
			for i := range rd {
				rd[i] = float64(rdm.v[i])
			}
			dfq, dfk, dv, mq, mk, mv := linBackward64(d, aftHeadVals(ym, t, e.dh), rd, aftHeadVals(dym, t, e.dh))
			eq, ek, ev := newExpect("dfq", lh), newExpect("dfk", lh), newExpect("dv", lh)
			for i := 0; i < t; i++ {
				klo, khi := d.keys(i)
				rlo, rhi := d.rows(i)
				for c := 0; c < e.dh; c++ {
					x := i*e.dh + c
					eq.set(i, c, dfq[x], linRel(khi-klo, e.dh)*mq[x]+0x1p-120)
					ek.set(i, c, dfk[x], linRel(rhi-rlo, e.dh)*mk[x]+0x1p-120)
					ev.set(i, c, dv[x], linRel(rhi-rlo, e.dh)*mv[x]+0x1p-120)
				}
			}
			return scenario{
				ops: []*operand{
					{name: "fq", lay: lh, vals: fq.v}, {name: "fk", lay: lh, vals: fk.v}, {name: "v", lay: lh, vals: v.v},
					{name: "y", lay: lh, vals: ym.v}, {name: "rd", lay: lr, vals: rdm.v}, {name: "dy", lay: lh, vals: dym.v},
					{name: "dfq", lay: lh, role: out}, {name: "dfk", lay: lh, role: out}, {name: "dv", lay: lh, role: out},
				},
				want: map[string]*expect{"dfq": eq, "dfk": ek, "dv": ev},
			}
		},
	}
}

// aftVariantSpecs are the specs whose kernels the standalone tests below
// exercise: the awkward sizes and one shipped size per variant.
var aftVariantSpecs = []string{
	"odd_aft_full", "odd_aft_local", "odd_aft_conv", "odd_aft_simple", "odd_linear",
	"odd_aft_local_w1", "odd_aft_local_wn", "wide_aft_local", "wide_linear",
	"aft_full", "aft_local", "aft_conv", "aft_simple", "linear",
}

// aftSets returns every kernel set of spec name this CPU runs (ignoring
// SYNTHGEN_ISA: these tests compare the levels with each other).
func aftSets(t *testing.T, name string) []kernels.Set {
	t.Helper()
	sets, err := kernels.Sets(name)
	if err != nil {
		t.Fatal(err)
	}
	return sets
}

// denseCall runs a kernel on dense buffers of one spec: head slices at
// head h of [t, D] matrices.
type aftDense struct {
	e  *env
	g  aftGeom
	t  int
	in *aftData
}

// toHead writes dense [t][dh] values into head h of a fresh [t, D] matrix.
func (x aftDense) toHead(v []float64) []float32 {
	out := make([]float32, x.t*x.e.d)
	for i := 0; i < x.t; i++ {
		for c := 0; c < x.e.dh; c++ {
			out[i*x.e.d+x.e.h*x.e.dh+c] = float32(v[i*x.e.dh+c])
		}
	}
	return out
}

// fromHead reads head h of a [t, D] matrix.
func (x aftDense) fromHead(s []float32) []float64 {
	out := make([]float64, x.t*x.e.dh)
	for i := 0; i < x.t; i++ {
		for c := 0; c < x.e.dh; c++ {
			out[i*x.e.dh+c] = float64(s[i*x.e.d+x.e.h*x.e.dh+c])
		}
	}
	return out
}

// headSlice is head h's slice of a [t, D] matrix.
func (x aftDense) headSlice(s []float32) []float32 { return s[x.e.h*x.e.dh:] }

// aftResult holds one level's forward and backward results on dense data.
type aftResult struct {
	z, m, rd, dk, dv []float64
	dw               []float64 // [t][t]
	du               []float64
}

// run calls the spec's forward and backward kernels of set s with dz.
func (x aftDense) run(s kernels.Set, dz []float64) aftResult {
	e, t := x.e, x.t
	k, v := x.toHead(x.in.k), x.toHead(x.in.v)
	z, m, rd := make([]float32, t*e.d), make([]float32, t*e.d), make([]float32, t*e.d)
	dzs, dk, dv := x.toHead(dz), make([]float32, t*e.d), make([]float32, t*e.d)
	w := make([]float32, t*e.n)
	dw := make([]float32, t*e.n)
	var uw, du []float32
	if x.in.w != nil {
		for i := 0; i < t; i++ {
			for j := 0; j <= i; j++ {
				w[i*e.n+j] = float32(x.in.w[i*t+j])
			}
		}
	}
	if x.in.u != nil {
		uw, du = make([]float32, len(x.in.u)), make([]float32, len(x.in.u))
		for l, val := range x.in.u {
			uw[l] = float32(val)
		}
	}
	hs := x.headSlice
	switch {
	case s.AFTFull != nil:
		s.AFTFull(t, hs(k), hs(v), w, hs(z), hs(m), hs(rd))
		s.AFTFullBack(t, hs(k), hs(v), w, hs(z), hs(m), hs(rd), hs(dzs), hs(dk), hs(dv), dw)
	case s.AFTLocal != nil:
		s.AFTLocal(t, hs(k), hs(v), w, hs(z), hs(m), hs(rd))
		s.AFTLocalBack(t, hs(k), hs(v), w, hs(z), hs(m), hs(rd), hs(dzs), hs(dk), hs(dv), dw)
	case s.AFTConv != nil:
		s.AFTConv(t, hs(k), hs(v), uw, hs(z), hs(m), hs(rd))
		s.AFTConvBack(t, hs(k), hs(v), uw, hs(z), hs(m), hs(rd), hs(dzs), hs(dk), hs(dv), du)
	case s.AFTSimple != nil:
		s.AFTSimple(t, hs(k), hs(v), hs(z), hs(m), hs(rd))
		s.AFTSimpleBack(t, hs(k), hs(v), hs(z), hs(m), hs(rd), hs(dzs), hs(dk), hs(dv))
	default:
		panic("no AFT kernels")
	}
	r := aftResult{z: x.fromHead(z), m: x.fromHead(m), rd: x.fromHead(rd), dk: x.fromHead(dk), dv: x.fromHead(dv)}
	r.dw = make([]float64, t*t)
	for i := 0; i < t; i++ {
		for j := 0; j <= i; j++ {
			r.dw[i*t+j] = float64(dw[i*e.n+j])
		}
	}
	for _, val := range du {
		r.du = append(r.du, float64(val))
	}
	return r
}

// aftClose reports the entries where got and want differ by more than
// tol·(max|want| + |want_k|) (NaN never passes).
func aftClose(what string, got, want []float64, tol float64) []string {
	scale := 0.0
	for _, w := range want {
		scale = math.Max(scale, math.Abs(w))
	}
	var bad []string
	n := 0
	for k := range want {
		if d := math.Abs(got[k] - want[k]); !(d <= tol*(scale+math.Abs(want[k]))) {
			n++
			if len(bad) < 3 {
				bad = append(bad, fmt.Sprintf("[%d] %.7g vs %.7g", k, got[k], want[k]))
			}
		}
	}
	if n == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s: %d of %d differ: %s", what, n, len(want), strings.Join(bad, "; "))}
}

// aftSpecEnv returns a linked spec's env and its AFT geometry.
func aftSpecEnv(t *testing.T, name string) *env {
	t.Helper()
	spec, err := kernels.Spec(name)
	if err != nil {
		t.Fatal(err)
	}
	return envOf(spec)
}

// aftFieldOf returns the forward kernel field of an AFT spec.
func aftFieldOf(s kernels.Set) string {
	for _, f := range []string{"AFTFull", "AFTLocal", "AFTConv", "AFTSimple"} {
		if !field(s, f).IsNil() {
			return f
		}
	}
	return ""
}

// TestAFTGradients checks, for every AFT spec at t = 7 and with ordinary
// and ±30 inputs, (1) the float64 reference's analytic gradient against
// central differences of the float64 forward reference, and (2) every
// level's backward kernel, fed the statistics of the same level's forward
// kernel, against those central differences.
func TestAFTGradients(t *testing.T) {
	const h = 1e-4
	for _, name := range aftVariantSpecs {
		if strings.Contains(name, "linear") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			e := aftSpecEnv(t, name)
			sets := aftSets(t, name)
			g := aftGeomOf(e, aftFieldOf(sets[0]))
			for _, mode := range []string{"random", "pm30"} {
				tl := min(7, e.n)
				rng := rngFor("aft gradients", name, mode)
				in := makeAFTIn(e, g, tl, mode, rng)
				if in.d.w != nil { // the NaN outside the window are never read; make them finite for the perturbations
					for i := range in.d.w {
						if math.IsNaN(in.d.w[i]) {
							in.d.w[i] = 0
						}
					}
				}
				r := randSlice(rng, tl*e.dh)
				dz := make([]float64, len(r))
				for i := range r {
					dz[i] = float64(r[i])
				}
				loss := func() float64 {
					z, _, _ := aftForward64(g, in.d)
					s := 0.0
					for i := range z {
						s += z[i] * dz[i]
					}
					return s
				}
				type coord struct {
					name string
					p    *float64
				}
				var coords []coord
				for i := range in.d.k {
					coords = append(coords, coord{fmt.Sprintf("k[%d]", i), &in.d.k[i]}, coord{fmt.Sprintf("v[%d]", i), &in.d.v[i]})
				}
				for i := 0; i < tl; i++ {
					for j := 0; j <= i; j++ {
						if _, learned := g.bias(in.d, i, j); learned && g.mode != "conv" {
							coords = append(coords, coord{fmt.Sprintf("w[%d,%d]", i, j), &in.d.w[i*tl+j]})
						}
					}
				}
				for l := range in.d.u {
					coords = append(coords, coord{fmt.Sprintf("u[%d]", l), &in.d.u[l]})
				}
				fd := make([]float64, len(coords))
				for ci, c := range coords {
					x := *c.p
					*c.p = x + h
					up := loss()
					*c.p = x - h
					down := loss()
					*c.p = x
					fd[ci] = (up - down) / (2 * h)
				}
				gather := func(dk, dv, dw, du []float64) []float64 {
					out := make([]float64, 0, len(coords))
					for i := range dk {
						out = append(out, dk[i], dv[i])
					}
					for i := 0; i < tl; i++ {
						for j := 0; j <= i; j++ {
							if _, learned := g.bias(in.d, i, j); learned && g.mode != "conv" {
								out = append(out, dw[i*tl+j])
							}
						}
					}
					return append(out, du[:len(in.d.u)]...)
				}
				z, m, den := aftForward64(g, in.d)
				rd := make([]float64, len(den))
				for i := range den {
					rd[i] = 1 / den[i]
				}
				dk, dv, dw, du := aftBackward64(g, in.d, z, m, rd, dz)
				report(t, aftClose(mode+": reference gradient vs central differences", gather(dk, dv, dw, du), fd, 1e-6))
				for _, s := range sets {
					x := aftDense{e: e, g: g, t: tl, in: in.d}
					res := x.run(s, dz)
					if res.du == nil {
						res.du = make([]float64, 1)
					}
					report(t, aftClose(fmt.Sprintf("%s %s: kernel gradient vs central differences", mode, s.ISA),
						gather(res.dk, res.dv, res.dw, res.du), fd, 1e-4))
				}
			}
		})
	}
}

// TestLinearGradients is TestAFTGradients for linear attention: the
// reference's analytic gradient and every level's backward kernel (fed
// that level's forward outputs) against central differences of the float64
// forward.
func TestLinearGradients(t *testing.T) {
	const h = 1e-6
	for _, name := range []string{"odd_linear", "wide_linear", "linear"} {
		t.Run(name, func(t *testing.T) {
			e := aftSpecEnv(t, name)
			tl := min(7, e.n)
			rng := rngFor("linear gradients", name)
			_, _, _, d := linInputs(e, tl, "random", rng)
			dy := make([]float64, tl*e.dh)
			for i := range dy {
				dy[i] = rng.NormFloat64()
			}
			loss := func() float64 {
				y, _ := linForward64(d)
				s := 0.0
				for i := range y {
					s += y[i] * dy[i]
				}
				return s
			}
			fdOf := func(xs []float64) []float64 {
				out := make([]float64, len(xs))
				for i := range xs {
					x := xs[i]
					xs[i] = x + h
					up := loss()
					xs[i] = x - h
					down := loss()
					xs[i] = x
					out[i] = (up - down) / (2 * h)
				}
				return out
			}
			fq, fk, fv := fdOf(d.fq), fdOf(d.fk), fdOf(d.v)
			y, den := linForward64(d)
			rd := make([]float64, tl)
			for i := range rd {
				rd[i] = 1 / den[i]
			}
			dfq, dfk, dv, _, _, _ := linBackward64(d, y, rd, dy)
			report(t, aftClose("reference dfq", dfq, fq, 1e-6), aftClose("reference dfk", dfk, fk, 1e-6), aftClose("reference dv", dv, fv, 1e-6))
			x := aftDense{e: e, t: tl}
			for _, s := range aftSets(t, name) {
				yb, rdb := make([]float32, tl*e.d), make([]float32, tl*e.heads)
				gq, gk, gv := make([]float32, tl*e.d), make([]float32, tl*e.d), make([]float32, tl*e.d)
				hs := x.headSlice
				qs, ks, vs, dys := x.toHead(d.fq), x.toHead(d.fk), x.toHead(d.v), x.toHead(dy)
				s.Linear(tl, hs(qs), hs(ks), hs(vs), hs(yb), rdb[e.h:])
				s.LinearBack(tl, hs(qs), hs(ks), hs(vs), hs(yb), rdb[e.h:], hs(dys), hs(gq), hs(gk), hs(gv))
				report(t, aftClose(s.ISA.String()+" dfq", x.fromHead(gq), fq, 1e-4),
					aftClose(s.ISA.String()+" dfk", x.fromHead(gk), fk, 1e-4),
					aftClose(s.ISA.String()+" dv", x.fromHead(gv), fv, 1e-4))
			}
		})
	}
}

// TestAFTRelations checks, at every level, relations between variants that
// the card's formulas imply, on the awkward-size specs (same n, d, heads):
// forward outputs z, m, rd and backward outputs dk, dv and the bias
// gradients.
func TestAFTRelations(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		what     string
		a, b     string
		makeW    func(i, j int, w float64) float64 // a's w from b's (b full) or the shared draw
		makeU    bool                              // a is aft_conv: u from the draw, b's w[i,j] = u[i−j] in the window
		zeroDiag bool
	}{
		{what: "window 1 with w_ii = 0 is aft_simple", a: "odd_aft_local_w1", b: "odd_aft_simple", zeroDiag: true},
		{what: "window n is aft_full", a: "odd_aft_local_wn", b: "odd_aft_full"},
		{what: "aft_local is aft_full with w = 0 (not −∞) outside the window", a: "odd_aft_local", b: "odd_aft_full"},
		{what: "aft_conv is aft_local with w[i,j] = u[i−j]", a: "odd_aft_conv", b: "odd_aft_local", makeU: true},
	}
	for _, tc := range cases {
		t.Run(tc.a+"_vs_"+tc.b, func(t *testing.T) {
			ea, eb := aftSpecEnv(t, tc.a), aftSpecEnv(t, tc.b)
			setsA, setsB := aftSets(t, tc.a), aftSets(t, tc.b)
			ga, gb := aftGeomOf(ea, aftFieldOf(setsA[0])), aftGeomOf(eb, aftFieldOf(setsB[0]))
			for _, tl := range []int{1, 7, ea.n - 1, ea.n} {
				for _, mode := range []string{"random", "pm30", "pm1e4"} {
					rng := rngFor("relations", tc.a, tc.b, tl, mode)
					in := makeAFTIn(ea, ga, tl, mode, rng)
					da := in.d
					db := &aftData{t: tl, dh: eb.dh, k: da.k, v: da.v}
					switch {
					case tc.zeroDiag: // only w_ii is used; b has no w
						for i := range da.w {
							da.w[i] = nan
						}
						for i := 0; i < tl; i++ {
							da.w[i*tl+i] = 0
						}
					case tc.makeU: // b (aft_local) gets w[i,j] = u[i−j] in the window
						db.w = make([]float64, tl*tl)
						for i := 0; i < tl; i++ {
							for j := 0; j <= i; j++ {
								db.w[i*tl+j] = nan
								if i-j < ga.s {
									db.w[i*tl+j] = da.u[i-j]
								}
							}
						}
					default: // b (aft_full) gets a's w in the window, 0 outside
						db.w = make([]float64, tl*tl)
						for i := 0; i < tl; i++ {
							for j := 0; j <= i; j++ {
								if ga.mode == "full" || i-j < ga.s {
									db.w[i*tl+j] = da.w[i*tl+j]
								}
							}
						}
					}
					dz := make([]float64, tl*ea.dh)
					for i := range dz {
						dz[i] = rng.NormFloat64()
					}
					for li := range setsA {
						if li >= len(setsB) || setsA[li].ISA != setsB[li].ISA {
							t.Fatalf("%s and %s have different levels", tc.a, tc.b)
						}
						ra := aftDense{e: ea, g: ga, t: tl, in: da}.run(setsA[li], dz)
						rb := aftDense{e: eb, g: gb, t: tl, in: db}.run(setsB[li], dz)
						lbl := fmt.Sprintf("t=%d %s %s", tl, mode, setsA[li].ISA)
						report(t, aftClose(lbl+" z", ra.z, rb.z, 1e-5), aftClose(lbl+" m", ra.m, rb.m, 0),
							aftClose(lbl+" rd", ra.rd, rb.rd, 1e-5),
							aftClose(lbl+" dk", ra.dk, rb.dk, 1e-5), aftClose(lbl+" dv", ra.dv, rb.dv, 1e-5))
						switch {
						case tc.makeU: // du[l] = Σ_{i−j=l} dw[i,j]
							want := make([]float64, ga.s)
							for i := 0; i < tl; i++ {
								for j := max(0, i-ga.s+1); j <= i; j++ {
									want[i-j] += rb.dw[i*tl+j]
								}
							}
							report(t, aftClose(lbl+" du", ra.du, want, 1e-5))
						case tc.zeroDiag:
							for i := 0; i < tl; i++ {
								for j := 0; j < i; j++ {
									if ra.dw[i*tl+j] != 0 {
										t.Errorf("%s: dw[%d,%d] = %g outside the window", lbl, i, j, ra.dw[i*tl+j])
									}
								}
							}
						default:
							want := make([]float64, tl*tl)
							for i := 0; i < tl; i++ {
								for j := 0; j <= i; j++ {
									if ga.mode == "full" || i-j < ga.s {
										want[i*tl+j] = rb.dw[i*tl+j]
									}
								}
							}
							report(t, aftClose(lbl+" dw", ra.dw, want, 1e-5))
						}
					}
				}
			}
		})
	}
}

// aftPublicBug is a forward kernel with one of the faults of public AFT
// implementations (variants-notes.md §2), in float32 Go.
type aftPublicBug struct {
	name  string
	spec  string
	field string
	mode  string
	fn    func(e *env, g aftGeom, a args)
}

// aftBugForward writes z_i[c] = zf(i, c) (and zeros for m and rd; only z is
// checked).
func aftBugForward(e *env, a args, zf func(i, c int) float64) {
	for i := 0; i < a.t; i++ {
		for c := 0; c < e.dh; c++ {
			a.s["z"][i*e.d+c] = float32(zf(i, c))
			a.s["m"][i*e.d+c], a.s["rd"][i*e.d+c] = 0, 0
		}
	}
}

// aftWeighted is Σ_{j≤i} wt(j)·v_j[c] / Σ_{j≤i} wt(j).
func aftWeighted(e *env, a args, i, c int, wt func(j int) float64) float64 {
	var num, den float64
	for j := 0; j <= i; j++ {
		num += wt(j) * float64(a.s["v"][j*e.d+c])
		den += wt(j)
	}
	return num / den
}

var aftPublicBugs = []aftPublicBug{
	{"aft_local with −∞ instead of 0 outside the window (labml-style mask)", "odd_aft_local", "AFTLocal", "random",
		func(e *env, g aftGeom, a args) {
			aftBugForward(e, a, func(i, c int) float64 {
				return aftWeighted(e, a, i, c, func(j int) float64 {
					if i-j >= g.s {
						return 0
					}
					return math.Exp(float64(a.s["k"][j*e.d+c] + a.s["w"][i*e.n+j]))
				})
			})
		}},
	{"aft_simple normalised at the key's own position (fast-transformers)", "odd_aft_simple", "AFTSimple", "random",
		func(e *env, g aftGeom, a args) {
			aftBugForward(e, a, func(i, c int) float64 {
				var z, den float64
				for j := 0; j <= i; j++ {
					ej := math.Exp(float64(a.s["k"][j*e.d+c]))
					den += ej
					z += ej / den * float64(a.s["v"][j*e.d+c])
				}
				return z
			})
		}},
	{"unguarded exp in float32 (rish-16, no max subtraction)", "odd_aft_full", "AFTFull", "pm1e4",
		func(e *env, g aftGeom, a args) {
			aftBugForward(e, a, func(i, c int) float64 {
				var num, den float32
				for j := 0; j <= i; j++ {
					x := float32(math.Exp(float64(a.s["k"][j*e.d+c] + a.s["w"][i*e.n+j])))
					num += x * a.s["v"][j*e.d+c]
					den += x
				}
				return float64(num / den)
			})
		}},
	{"bias multiplied instead of added (fast-transformers K∗w)", "odd_aft_full", "AFTFull", "random",
		func(e *env, g aftGeom, a args) {
			aftBugForward(e, a, func(i, c int) float64 {
				return aftWeighted(e, a, i, c, func(j int) float64 {
					return math.Exp(float64(a.s["k"][j*e.d+c] * a.s["w"][i*e.n+j]))
				})
			})
		}},
}

// TestAFTCatchesPublicBugs runs each public implementation's bug through
// the forward scenario at t = 15 next to the correct Go kernel: the correct
// kernel must pass and the bug must be reported, so the references and
// tolerances above can fail.
func TestAFTCatchesPublicBugs(t *testing.T) {
	for _, b := range aftPublicBugs {
		t.Run(b.name, func(t *testing.T) {
			e := aftSpecEnv(t, b.spec)
			goK, err := kernels.LookupAt(b.spec, kernels.Go)
			if err != nil {
				t.Fatal(err)
			}
			kt, _ := kernelTestFor(b.field)
			good := bind(field(goK.Set, b.field))
			g := aftGeomOf(e, b.field)
			bad := func(a args) float32 { b.fn(e, g, a); return 0 }
			const tl = 15
			sc := kt.scenario(e, b.field, tl, b.mode, rngFor("public bug", b.name))
			sc.t, sc.label = tl, b.mode
			problems := runScenario(sc, []level{{"go", good}, {"bug", bad}})
			caught := false
			for _, p := range problems {
				if strings.Contains(p, " go: ") {
					t.Errorf("the correct kernel fails: %s", p)
				}
				if strings.Contains(p, " bug: z") {
					caught = true
				}
			}
			if !caught {
				t.Errorf("not caught; problems: %v", problems)
			}
		})
	}
}
