package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// TestStrips checks the strip path (strips_bf16.go) on its own, at every
// bf16 level this CPU has, causal and bidirectional, vanilla's form (W a
// sequence's rows d apart, scale 1/√dh) and dense's (W rows dh apart, a
// bias), each alone and in a mixture with a random component (B = wp·B' +
// wr·R; the gradients wp times their own, dB left in A and B' in the
// worker's scratch, for the mixture weight's gradient), with the
// probabilities kept in A and made again in the backward (recompute; the
// forward then writes nothing to A, and they are checked as probs makes
// them for AttentionMap), for lengths around the strip (1, strip−1,
// strip, strip+1, two strips and a part, N) and head widths on and off
// multiples of 32, against a float64 reference that rounds each product's operands to bf16
// where the path does:
//
//	B = s·bf16(X)·bf16(W)ᵀ + b, A = softmax(B), Y = bf16(A)·bf16(V)
//	G = bf16(dY)·bf16(V)ᵀ, dB = s·A ⊙ (G − rowsum(A ⊙ G))
//	dX = bf16(dB)·bf16(W), dW = bf16(dB)ᵀ·bf16(X), db = colsum(dB), dV = bf16(A)ᵀ·bf16(dY)
//
// A within 1e-5; each product's entries within 2⁻⁶·Σ_p |x_p|·|y_p| (its
// terms' magnitudes): a product operand the path rounds the other way than
// the reference (A and dB come from float32 arithmetic) is one bf16 ulp
// (2⁻⁷ relative) off, and either operand may be. An operand read from the
// wrong row or column is off by the terms themselves. Nothing outside the
// head's t rows and dh columns of Y, dX, dW, db and dV is written, nor A's
// rows past t; A's entries above the diagonal are 0 up to the strip's last
// row, and not written past it (causal).
func TestStrips(t *testing.T) {
	levels := []bf16.Level{bf16.Go, bf16.AVX512BF16, bf16.AMX}
	const n = 150
	for _, l := range levels {
		kn, err := bf16.New(l)
		if err != nil {
			t.Logf("%s: not tested: %v", l, err)
			continue
		}
		for _, causal := range []bool{true, false} {
			for _, form := range []struct{ dense, mix bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
				for _, rec := range []bool{false, true} {
					for _, dh := range []int{20, 32, 40} {
						for _, tl := range []int{1, strip - 1, strip, strip + 1, 2*strip + 9, n} {
							name := fmt.Sprintf("%s/causal=%v/dense=%v/mix=%v/recompute=%v/dh=%d/t=%d", l, causal, form.dense, form.mix, rec, dh, tl)
							t.Run(name, func(t *testing.T) { checkStrips(t, kn, causal, form.dense, form.mix, rec, n, dh, tl) })
						}
					}
				}
			}
		}
	}
}

func checkStrips(t *testing.T, kn *bf16.Kernel, causal, dense, mix, recompute bool, n, dh, tl int) {
	const heads, h = 3, 1 // the head in the middle: its neighbours' columns are guarded
	d := heads * dh
	r := rand.New(rand.NewPCG(uint64(n*dh+tl), 7))
	const guard = float32(-77.25)
	mk := func(rows, cols int, random bool) []float32 {
		x := make([]float32, rows*cols)
		for i := range x {
			x[i] = guard
			if random {
				x[i] = float32(r.NormFloat64())
			}
		}
		return x
	}
	q, v, dy := mk(n, d, true), mk(n, d, true), mk(n, d, true)
	for i := range q { // sharp rows, as trained attention has
		q[i] *= 2.5
	}
	y, dq, dv := mk(n, d, false), mk(n, d, false), mk(n, d, false)
	a := mk(n, n, false)
	// W and its gradient: a sequence's keys (vanilla), or a matrix of N
	// rows dh wide and a bias (dense).
	base := h * dh
	ldw, wOff := d, base
	scale := 1 / math.Sqrt(float64(dh))
	var bias, dbias []float32
	if dense {
		ldw, wOff, scale = dh, 0, 1
		bias, dbias = mk(n, 1, true), mk(n, 1, false)
	}
	k, dk := mk(n, ldw, true), mk(n, ldw, false)
	kpH, kpN := bf16.Pad(dh), bf16.Pad(n)
	buf := newStripBF(kn, n, dh)
	st := stripTask{
		kn: kn, sc: &buf, t: tl, d: d, dh: dh, n: n, kpH: kpH, kpN: kpN,
		causal: causal, scale: float32(scale), wp: 1, recompute: recompute,
		x: q[base:], w: k[wOff:], ldw: ldw, bias: bias, v: v[base:], a: a, base: base,
	}
	// A mixture: the product's weight wp and one random component, R
	// with weight wr.
	wp, wr, R := 1.0, 0.0, []float32(nil)
	if mix {
		wp, wr, R = 0.7, 0.45, mk(n, n, true)
		st.wp, st.rs, st.rw, st.keep = float32(wp), [][]float32{R}, []float32{float32(wr)}, true
		st.bp = mk(n, n, false)
	}
	st.forward(y[base:], refSoftmaxRows(causal, n))
	aF := append([]float32(nil), a...)
	// The probabilities: the forward's in A, or (recompute) none there and
	// those probs makes again, as AttentionMap gets them (stripProbs).
	pF := aF
	if recompute {
		for i, x := range aF {
			if x != guard {
				t.Fatalf("A[%d][%d] = %v written by the forward: it keeps nothing when the backward makes them again", i/n, i%n, x)
			}
		}
		pF = mk(n, n, false)
		st.packKeys(buf.kb, st.w, st.ldw)
		for i0 := 0; i0 < tl; i0 += strip {
			i1 := min(i0+strip, tl)
			st.probs(i0, i1, refSoftmaxRows(causal, n), buf.p, nil)
			for i := i0; i < i1; i++ {
				copy(pF[i*n:i*n+st.keys(i1)], buf.p[(i-i0)*n:])
			}
		}
	}
	st.backward(dy[base:], dq[base:], dk[wOff:], dbias, dv[base:], refSoftmaxRows(causal, n), refSoftmaxRowsBack(causal, n))

	// The reference, in float64.
	rd := func(x float32) float64 { return float64(bf16.Round(x)) }
	keys := func(i int) int {
		if causal {
			return i + 1
		}
		return tl
	}
	at := func(x []float32, i, c int) float32 { return x[i*d+base+c] }
	atW := func(x []float32, j, c int) float32 { return x[j*ldw+wOff+c] }
	A := make([][]float64, tl)
	for i := range A {
		A[i] = make([]float64, keys(i))
		mx := math.Inf(-1)
		for j := range A[i] {
			var s float64
			for c := 0; c < dh; c++ {
				s += rd(at(q, i, c)) * rd(atW(k, j, c))
			}
			A[i][j] = s * scale
			if dense {
				A[i][j] += float64(bias[j])
			}
			if mix {
				A[i][j] = wp*A[i][j] + wr*float64(R[i*n+j])
			}
			mx = max(mx, A[i][j])
		}
		var sum float64
		for j := range A[i] {
			A[i][j] = math.Exp(A[i][j] - mx)
			sum += A[i][j]
		}
		for j := range A[i] {
			A[i][j] /= sum
		}
	}
	// check compares got's entry with the reference sum of terms x·y, x
	// known to within ex before its rounding.
	check := func(what string, i, c int, got float32, terms func(add func(x, y, ex float64))) {
		t.Helper()
		var s, mag, extra float64
		terms(func(x, y, ex float64) { s += x * y; mag += math.Abs(x * y); extra += ex * math.Abs(y) })
		if tol := 0x1p-6*mag + extra + 1e-6; math.Abs(float64(got)-s) > tol || math.IsNaN(float64(got)) {
			t.Fatalf("%s[%d][%d] = %v, reference %v (tolerance %.3g)", what, i, c, got, s, tol)
		}
	}
	for i := 0; i < tl; i++ {
		for j := 0; j < n; j++ {
			got := pF[i*n+j]
			switch {
			case j < keys(i):
				if math.Abs(float64(got)-A[i][j]) > 1e-5 {
					t.Fatalf("A[%d][%d] = %v, reference %v", i, j, got, A[i][j])
				}
			case causal && j < min((i/strip+1)*strip, tl):
				if got != 0 {
					t.Fatalf("A[%d][%d] = %v above the diagonal, inside its strip's keys: want 0", i, j, got)
				}
			default:
				if got != guard {
					t.Fatalf("A[%d][%d] = %v written past its strip's keys", i, j, got)
				}
			}
		}
		for c := 0; c < dh; c++ {
			check("Y", i, c, at(y, i, c), func(add func(x, y, ex float64)) {
				for j := range A[i] {
					add(rd(float32(A[i][j])), rd(at(v, j, c)), 0)
				}
			})
		}
	}
	for i := tl; i < n; i++ {
		for j := 0; j < n; j++ {
			if pF[i*n+j] != guard || a[i*n+j] != guard {
				t.Fatalf("A[%d][%d] = %v written past t = %d", i, j, a[i*n+j], tl)
			}
		}
	}
	// dB, and the bound of its float32 value's error: G's float32 sums
	// (dh terms, 2⁻¹⁶ of their magnitudes gm) and A's (1e-6 relative).
	dB, dBerr := make([][]float64, tl), make([][]float64, tl)
	for i := range dB {
		dB[i], dBerr[i] = make([]float64, keys(i)), make([]float64, keys(i))
		var s, sm float64
		g, gm := make([]float64, keys(i)), make([]float64, keys(i))
		for j := range g {
			for c := 0; c < dh; c++ {
				x := rd(at(dy, i, c)) * rd(at(v, j, c))
				g[j] += x
				gm[j] += math.Abs(x)
			}
			s += A[i][j] * g[j]
			sm += A[i][j] * gm[j]
		}
		for j := range g {
			dB[i][j] = A[i][j] * (g[j] - s) * scale
			dBerr[i][j] = A[i][j] * scale * ((gm[j]+sm)*0x1p-16 + 1e-6*math.Abs(g[j]-s))
		}
	}
	// In a mixture the backward leaves dB (unscaled) in A, and the
	// product's logits B' (without its weight) in st.bp; alone, A is as
	// the forward left it (the probabilities, or unwritten).
	for i := 0; i < tl; i++ {
		for j := 0; j < n; j++ {
			got := a[i*n+j]
			if !mix || j >= keys(i) {
				if got != aF[i*n+j] {
					t.Fatalf("A[%d][%d] = %v after the backward, %v after the forward", i, j, got, aF[i*n+j])
				}
				continue
			}
			if e := dBerr[i][j]/scale + 1e-6; math.Abs(float64(got)-dB[i][j]/scale) > e {
				t.Fatalf("A[%d][%d] = %v after the backward, dB %v (tolerance %.3g)", i, j, got, dB[i][j]/scale, e)
			}
			var bp, bm float64 // B'_ij and its terms' magnitude
			for c := 0; c < dh; c++ {
				x := rd(at(q, i, c)) * rd(atW(k, j, c))
				bp += x
				bm += math.Abs(x)
			}
			bp *= scale
			if dense {
				bp += float64(bias[j])
			}
			if e := bm*scale*0x1p-16 + 1e-6; math.Abs(float64(st.bp[i*n+j])-bp) > e {
				t.Fatalf("B'[%d][%d] = %v, reference %v (tolerance %.3g)", i, j, st.bp[i*n+j], bp, e)
			}
		}
	}
	for i := 0; i < tl; i++ {
		for c := 0; c < dh; c++ {
			check("dX", i, c, at(dq, i, c), func(add func(x, y, ex float64)) {
				for j := range dB[i] {
					add(wp*rd(float32(dB[i][j])), rd(atW(k, j, c)), wp*dBerr[i][j])
				}
			})
			check("dW", i, c, atW(dk, i, c), func(add func(x, y, ex float64)) {
				for r := 0; r < tl; r++ {
					if i < len(dB[r]) {
						add(wp*rd(float32(dB[r][i])), rd(at(q, r, c)), wp*dBerr[r][i])
					}
				}
			})
			check("dV", i, c, at(dv, i, c), func(add func(x, y, ex float64)) {
				for r := 0; r < tl; r++ {
					if i < len(A[r]) {
						add(rd(float32(A[r][i])), rd(at(dy, r, c)), 0)
					}
				}
			})
		}
	}
	if dense {
		for j := 0; j < n; j++ {
			var s, mag float64
			for i := 0; i < tl; i++ {
				if j < len(dB[i]) {
					s += dB[i][j]
					mag += 1e-5*math.Abs(dB[i][j]) + dBerr[i][j]
				}
			}
			s, mag = wp*s, wp*mag
			if j >= tl {
				s = float64(guard)
			}
			if math.Abs(float64(dbias[j])-s) > mag+1e-6 {
				t.Fatalf("db[%d] = %v, reference %v", j, dbias[j], s)
			}
		}
	}
	for _, g := range []struct {
		name      string
		x         []float32
		ld, first int
	}{{"Y", y, d, base}, {"dX", dq, d, base}, {"dW", dk, ldw, wOff}, {"dV", dv, d, base}} {
		for i := 0; i < n; i++ {
			for c := 0; c < g.ld; c++ {
				if (i >= tl || c < g.first || c >= g.first+dh) && g.x[i*g.ld+c] != guard {
					t.Fatalf("%s[%d][%d] = %v written outside the head's t = %d rows and columns [%d, %d)", g.name, i, c, g.x[i*g.ld+c], tl, g.first, g.first+dh)
				}
			}
		}
	}
}

// TestStripsRecompute: a model on the strip path that makes the
// probabilities again in the backward (recomputeN 0) gives, bit for bit,
// the attention maps (AttentionMap's own recomputation, stripProbs), the
// loss and the gradients of one that keeps them (recomputeN past N), at
// the Go level and the best this CPU has, for vanilla and dense, alone and
// in a mixture, causal and not, at t = 101 (two strips, one partial).
func TestStripsRecompute(t *testing.T) {
	levels := []bf16.Level{bf16.Go}
	if l, err := bf16.Best(bf16.AMX); err == nil && l != bf16.Go {
		levels = append(levels, l)
	}
	defer func(n int) { recomputeN = n }(recomputeN)
	for _, name := range []string{"vanilla", "dense", "random_vanilla", "enc_vanilla", "enc_dense"} {
		k, err := kernels.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range levels {
			kn, err := bf16.New(l)
			if err != nil {
				t.Fatal(err)
			}
			m, err := New(k.Spec, k, 3)
			if err != nil {
				t.Fatal(err)
			}
			m.SetBF16(kn)
			m.SetWorkers(2)
			const batch, tl = 2, 101
			r := rand.New(rand.NewPCG(5, 9))
			in, labels := make([]int32, batch*tl), []int32{1, 0}
			for i := range in {
				in[i] = int32(r.IntN(256))
			}
			ws := m.NewWorkspace(batch)
			run := func(keepN int) (loss float64, maps, grads [][]float32) {
				recomputeN = keepN
				if m.classes > 0 {
					loss = m.ForwardClassify(ws, in, labels, batch)
				} else {
					loss = m.Forward(ws, in, in, batch)
				}
				if !ws.stripsP || m.stripsRecompute() != (keepN == 0) {
					t.Fatalf("%s: strip path %v, recompute %v with recomputeN %d", name, ws.stripsP, m.stripsRecompute(), keepN)
				}
				for s := 0; s < batch; s++ {
					for ly := 0; ly < len(m.layers); ly++ {
						for h := 0; h < m.heads; h++ {
							dst := make([]float32, tl*tl)
							m.AttentionMap(ws, s, ly, h, dst)
							maps = append(maps, dst)
						}
					}
				}
				m.Backward(ws)
				for _, p := range m.Params {
					grads = append(grads, append([]float32(nil), p.Grad...))
				}
				return loss, maps, grads
			}
			lossK, mapsK, gradsK := run(m.n + 1)
			lossR, mapsR, gradsR := run(0)
			if lossR != lossK {
				t.Errorf("%s, %s: loss %v made again, %v kept", name, l, lossR, lossK)
			}
			for i := range mapsK {
				for j := range mapsK[i] {
					if mapsR[i][j] != mapsK[i][j] {
						t.Fatalf("%s, %s: map %d (sequence·layers·heads + layer·heads + head) [%d][%d] = %v made again, %v kept", name, l, i, j/tl, j%tl, mapsR[i][j], mapsK[i][j])
					}
				}
			}
			for pi := range gradsK {
				for j := range gradsK[pi] {
					if gradsR[pi][j] != gradsK[pi][j] {
						t.Fatalf("%s, %s: %s's gradient [%d] = %v made again, %v kept", name, l, m.Params[pi].Name, j, gradsR[pi][j], gradsK[pi][j])
					}
				}
			}
		}
	}
}

// refSoftmaxRows is SoftmaxRows over rows [i0, i1), in float64.
func refSoftmaxRows(causal bool, n int) func(t, i0, i1 int, b, a []float32) {
	return func(t, i0, i1 int, b, a []float32) {
		for i := i0; i < i1; i++ {
			w := t
			if causal {
				w = i + 1
			}
			br, ar := b[(i-i0)*n:(i-i0)*n+w], a[(i-i0)*n:(i-i0)*n+w]
			mx := math.Inf(-1)
			for _, x := range br {
				mx = max(mx, float64(x))
			}
			var s float64
			for j, x := range br {
				e := math.Exp(float64(x) - mx)
				ar[j] = float32(e)
				s += e
			}
			for j := range ar {
				ar[j] = float32(float64(ar[j]) / s)
			}
		}
	}
}

// refSoftmaxRowsBack is SoftmaxRowsBack over rows [i0, i1), in float64.
func refSoftmaxRowsBack(causal bool, n int) func(t, i0, i1 int, a, g, db []float32) {
	return func(t, i0, i1 int, a, g, db []float32) {
		for i := i0; i < i1; i++ {
			w := t
			if causal {
				w = i + 1
			}
			o := (i - i0) * n
			var s float64
			for j := 0; j < w; j++ {
				s += float64(a[o+j]) * float64(g[o+j])
			}
			for j := 0; j < w; j++ {
				db[o+j] = a[o+j] * (g[o+j] - float32(s))
			}
		}
	}
}

// BenchmarkStrips times one (sequence, head)'s attention at long1024_vanilla's
// size (t = N = 1024, dh = 64, causal) on one goroutine: the strip path's
// forward and backward at the best bf16 level this CPU has (the backward
// making the probabilities again, as it does at that N), and the
// float32 path's kernels beside them (VanillaLogits and SoftmaxValue;
// SoftmaxValueBack, VanillaLogitsBackX and BackW), in one run so that the
// ratio stands on a shared machine. GFLOP/s counts the products' nominal
// causal work (t²·dh multiply-adds each, halved by the mask), two
// forward and four backward: the recomputed logits are not counted.
func BenchmarkStrips(b *testing.B) {
	k, err := kernels.Lookup("long1024_vanilla")
	if err != nil {
		b.Fatal(err)
	}
	l, err := bf16.Best(bf16.AMX)
	if err != nil {
		b.Skip(err)
	}
	kn, err := bf16.New(l)
	if err != nil {
		b.Fatal(err)
	}
	const n, dh, heads = 1024, 64, 4
	d := dh * heads
	r := rand.New(rand.NewPCG(1, 2))
	mk := func(l int) []float32 {
		x := make([]float32, l)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	q, kk, v, dy := mk(n*d), mk(n*d), mk(n*d), mk(n*d)
	y, dq, dk, dv, a := mk(n*d), mk(n*d), mk(n*d), mk(n*d), mk(n*n)
	buf := newStripBF(kn, n, dh)
	st := stripTask{kn: kn, sc: &buf, t: n, d: d, dh: dh, n: n, kpH: bf16.Pad(dh), kpN: bf16.Pad(n),
		causal: true, scale: 0.125, wp: 1, recompute: true, x: q, w: kk, ldw: d, v: v, a: a}
	flops := func(b *testing.B, products int) {
		b.ReportMetric(float64(products)*n*n*dh*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
	b.Run("path=strips/pass=forward", func(b *testing.B) {
		for range b.N {
			st.forward(y, k.SoftmaxRows)
		}
		flops(b, 2)
	})
	b.Run("path=strips/pass=backward", func(b *testing.B) {
		for range b.N {
			st.backward(dy, dq, dk, nil, dv, k.SoftmaxRows, k.SoftmaxRowsBack)
		}
		flops(b, 4)
	})
	b.Run("path=float32/pass=forward", func(b *testing.B) {
		for range b.N {
			k.VanillaLogits(n, q, kk, nil, a, 0.125)
			k.SoftmaxValue(n, a, a, v, y)
		}
		flops(b, 2)
	})
	b.Run("path=float32/pass=backward", func(b *testing.B) {
		for range b.N {
			k.SoftmaxValueBack(n, a, v, dy, a, dv)
			k.VanillaLogitsBackX(n, a, kk, dq, 0.125)
			k.VanillaLogitsBackW(n, a, q, dk, nil, 0.125)
		}
		flops(b, 4)
	})
}
