package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// The backward kernels are compared with a float64 reference in
// kernels_test.go; a pair of kernel and reference that shared a wrong
// formula would pass there. Here each backward kernel is checked against
// central differences of its forward kernel (both at the Go level): for a
// random linear loss L = Σ r·out, the backward kernel fed dout = r must
// return ∂L/∂in.

const gradT = 7 // length of the gradient checks

// fdStep is the central-difference step for inputs of size about 1.
const fdStep = 1e-2

// gradCheck compares analytic gradients with central differences of loss
// over the inputs at positions idx of in. Tolerance: 0.1% of the largest
// gradient plus 0.1% of the entry. The float32 rounding of the loss over a
// step of 1e-2 and the O(h²) truncation stay below 3e-5 of the largest
// gradient on every shipped spec, while a wrong formula is off by the size
// of the gradients.
func gradCheck(what string, in []float32, idx []int, analytic []float64, loss func() float64) []string {
	scale := 0.0
	for _, g := range analytic {
		scale = math.Max(scale, math.Abs(g))
	}
	if scale == 0 {
		return []string{what + ": all analytic gradients are zero; the check would prove nothing"}
	}
	var bad []string
	for k, i := range idx {
		x := in[i]
		in[i] = float32(float64(x) + fdStep)
		up, hu := loss(), float64(in[i])-float64(x)
		in[i] = float32(float64(x) - fdStep)
		down, hd := loss(), float64(x)-float64(in[i])
		in[i] = x
		fd := (up - down) / (hu + hd)
		if d := math.Abs(fd - analytic[k]); !(d <= 1e-3*scale+1e-3*math.Abs(analytic[k])) {
			bad = append(bad, fmt.Sprintf("[%d]: analytic %.6g, central difference %.6g", k, analytic[k], fd))
		}
	}
	if n := len(bad); n > 0 {
		if n > 4 {
			bad = append(bad[:4], "…")
		}
		return []string{fmt.Sprintf("%s: %d of %d gradients wrong: %s", what, n, len(idx), strings.Join(bad, "; "))}
	}
	return nil
}

// report fails t with every problem.
func report(t *testing.T, problems ...[]string) {
	t.Helper()
	for _, ps := range problems {
		for _, p := range ps {
			t.Error(p)
		}
	}
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// triIdx lists the causal triangle's indices of a [t, n] matrix.
func triIdx(t, n int) []int {
	var out []int
	for i := 0; i < t; i++ {
		for j := 0; j <= i; j++ {
			out = append(out, i*n+j)
		}
	}
	return out
}

// logitIdx lists the indices of a [t, n] logit matrix that e's kernels
// use: the causal triangle, or the square of a bidirectional spec.
func (e *env) logitIdx(t int) []int {
	if e.bidi {
		return rectIdx(t, e.n, t)
	}
	return triIdx(t, e.n)
}

// rectIdx lists the indices of rows t of width w, stride apart.
func rectIdx(t, stride, w int) []int {
	var out []int
	for i := 0; i < t; i++ {
		for p := 0; p < w; p++ {
			out = append(out, i*stride+p)
		}
	}
	return out
}

func gather(s []float32, idx []int) []float64 {
	out := make([]float64, len(idx))
	for k, i := range idx {
		out[k] = float64(s[i])
	}
	return out
}

func dotAt(x []float32, r []float32, idx []int) float64 {
	s := 0.0
	for _, i := range idx {
		s += float64(x[i]) * float64(r[i])
	}
	return s
}

// TestGradients checks SoftmaxValueBack against SoftmaxValue, the product
// backward kernels against their product, and the tile backward against
// the tile, by central differences at t = 7, for every linked spec.
func TestGradients(t *testing.T) {
	for _, name := range kernels.Names() {
		t.Run(name, func(t *testing.T) {
			spec, err := kernels.Spec(name)
			if err != nil {
				t.Fatal(err)
			}
			e := envOf(spec)
			k, err := kernels.LookupAt(name, kernels.Go)
			if err != nil {
				t.Fatal(err)
			}
			tt := min(gradT, e.n)
			rng := rngFor("gradients", name)
			if k.SoftmaxValue != nil && k.SoftmaxValueBack != nil {
				t.Run("SoftmaxValue", func(t *testing.T) { softmaxGradients(t, e, k, tt, rng) })
			}
			for _, fam := range []string{"VanillaLogits", "DenseLogits", "FactRandomLogits"} {
				f, _ := field(k.Set, fam).Interface().(kernels.ProductFunc)
				bx, _ := field(k.Set, fam+"BackX").Interface().(kernels.ProductBackXFunc)
				bw, _ := field(k.Set, fam+"BackW").Interface().(kernels.ProductBackWFunc)
				if f == nil || bx == nil || bw == nil {
					continue
				}
				t.Run(fam, func(t *testing.T) { productGradients(t, e, e.geometry(fam), f, bx, bw, tt, rng) })
			}
			if k.FactDenseLogits != nil && k.FactDenseLogitsBack != nil {
				t.Run("FactDenseLogits", func(t *testing.T) { tileGradients(t, e, k, tt, rng) })
			}
		})
	}
}

func softmaxGradients(t *testing.T, e *env, k *kernels.Kernels, tt int, rng *rand.Rand) {
	n, d, dh := e.n, e.d, e.dh
	b := randSlice(rng, tt*n)
	b[2*n+1] = float32(math.Inf(-1)) // a masked entry: its gradient is 0
	v := randSlice(rng, tt*d)
	r := randSlice(rng, tt*d)
	a := make([]float32, tt*n)
	y := make([]float32, tt*d)
	yIdx := rectIdx(tt, d, dh)
	loss := func() float64 {
		k.SoftmaxValue(tt, b, a, v, y)
		return dotAt(y, r, yIdx)
	}
	loss()
	db := make([]float32, tt*n)
	dv := make([]float32, tt*d)
	k.SoftmaxValueBack(tt, a, v, r, db, dv)
	var bIdx []int
	for _, i := range e.logitIdx(tt) {
		if !math.IsInf(float64(b[i]), 0) {
			bIdx = append(bIdx, i)
		}
	}
	if db[2*n+1] != 0 {
		t.Errorf("db at a masked logit = %g, want 0", db[2*n+1])
	}
	report(t,
		gradCheck("db = ∂L/∂b", b, bIdx, gather(db, bIdx), loss),
		gradCheck("dv = ∂L/∂v", v, yIdx, gather(dv, yIdx), loss))
}

func productGradients(t *testing.T, e *env, g geometry, f kernels.ProductFunc, bx kernels.ProductBackXFunc, bw kernels.ProductBackWFunc, tt int, rng *rand.Rand) {
	n := e.n
	x := randSlice(rng, (tt-1)*g.lx+g.w)
	w := randSlice(rng, (tt-1)*g.lw+g.w)
	bias := randSlice(rng, tt)
	r := randSlice(rng, tt*n)
	c := make([]float32, tt*n)
	const scale = 0.7
	cIdx := e.logitIdx(tt)
	loss := func() float64 {
		f(tt, x, w, bias, c, scale)
		return dotAt(c, r, cIdx)
	}
	dx := make([]float32, len(x))
	bx(tt, r, w, dx, scale)
	dw := make([]float32, len(w))
	dbias := make([]float32, tt)
	bw(tt, r, x, dw, dbias, scale)
	xIdx, wIdx := rectIdx(tt, g.lx, g.w), rectIdx(tt, g.lw, g.w)
	report(t,
		gradCheck("dx = ∂L/∂x", x, xIdx, gather(dx, xIdx), loss),
		gradCheck("dw = ∂L/∂w", w, wIdx, gather(dw, wIdx), loss))
	bIdx := rectIdx(1, tt, tt)
	report(t, gradCheck("dbias = ∂L/∂bias", bias, bIdx, gather(dbias, bIdx), loss))
}

func tileGradients(t *testing.T, e *env, k *kernels.Kernels, tt int, rng *rand.Rand) {
	n, la, lb := e.n, e.heads*e.a, e.heads*e.b
	fa := randSlice(rng, (tt-1)*la+e.a)
	fb := randSlice(rng, (tt-1)*lb+e.b)
	r := randSlice(rng, tt*n)
	c := make([]float32, tt*n)
	cIdx := e.logitIdx(tt)
	loss := func() float64 {
		k.FactDenseLogits(tt, fa, fb, c)
		return dotAt(c, r, cIdx)
	}
	dfa := make([]float32, len(fa))
	dfb := make([]float32, len(fb))
	k.FactDenseLogitsBack(tt, r, fa, fb, dfa, dfb)
	aIdx, bIdx := rectIdx(tt, la, e.a), rectIdx(tt, lb, e.b)
	report(t,
		gradCheck("dfa = ∂L/∂fa", fa, aIdx, gather(dfa, aIdx), loss),
		gradCheck("dfb = ∂L/∂fb", fb, bIdx, gather(dfb, bIdx), loss))
}

// TestGradientCheckCatchesWrongFormula feeds gradCheck the gradient of a
// plausible wrong backward, db = a·g without the softmax Jacobian's
// −Σ a·g term, and a dx missing the scale, and requires both be reported.
func TestGradientCheckCatchesWrongFormula(t *testing.T) {
	spec, err := kernels.Spec("odd")
	if err != nil {
		t.Fatal(err)
	}
	e := envOf(spec)
	k, err := kernels.LookupAt("odd", kernels.Go)
	if err != nil {
		t.Fatal(err)
	}
	rng := rngFor("wrong formula")
	n, d, dh, tt := e.n, e.d, e.dh, gradT
	b, v, r := randSlice(rng, tt*n), randSlice(rng, tt*d), randSlice(rng, tt*d)
	a, y := make([]float32, tt*n), make([]float32, tt*d)
	yIdx := rectIdx(tt, d, dh)
	loss := func() float64 {
		k.SoftmaxValue(tt, b, a, v, y)
		return dotAt(y, r, yIdx)
	}
	loss()
	bIdx := triIdx(tt, n)
	wrong := make([]float64, len(bIdx))
	for q, idx := range bIdx {
		i, j := idx/n, idx%n
		g := 0.0
		for c := 0; c < dh; c++ {
			g += float64(r[i*d+c]) * float64(v[j*d+c])
		}
		wrong[q] = float64(a[idx]) * g
	}
	if p := gradCheck("db without the Jacobian term", b, bIdx, wrong, loss); len(p) == 0 {
		t.Error("gradCheck accepted db = a·g")
	} else {
		t.Logf("reported: %s", p[0])
	}

	g := e.geometry("VanillaLogits")
	x, w := randSlice(rng, (tt-1)*g.lx+g.w), randSlice(rng, (tt-1)*g.lw+g.w)
	rc, c := randSlice(rng, tt*n), make([]float32, tt*n)
	const scale = 0.7
	ploss := func() float64 {
		k.VanillaLogits(tt, x, w, nil, c, scale)
		return dotAt(c, rc, triIdx(tt, n))
	}
	dx := make([]float32, len(x))
	k.VanillaLogitsBackX(tt, rc, w, dx, 1) // scale forgotten
	xIdx := rectIdx(tt, g.lx, g.w)
	if p := gradCheck("dx without the scale", x, xIdx, gather(dx, xIdx), ploss); len(p) == 0 {
		t.Error("gradCheck accepted dx without the scale")
	} else {
		t.Logf("reported: %s", p[0])
	}
}
