package model

import (
	"math"

	"github.com/synthgen/synthgen/runtime/bf16"
)

// Vanilla's and dense's attention on the bf16 path, a strip of query rows
// at a time. Their logits are a product, s·X·Wᵀ + b (stripTask), of the
// input; each (sequence, head) is one task on one worker. Its W and V (and
// in the backward Wᵀ and Vᵀ) are packed once for the task, and a strip's
// logits, probabilities, ∂loss/∂P and their bf16 copies are made and used
// while they are in the worker's caches:
//
//	forward, per strip S of rows [i0, i1):
//	  B_S = s·X_S·Wᵀ + b               bf16 kernel, into the worker's strip buffer
//	  A_S = softmax(B_S)               the spec's SoftmaxRows on rows [i0, i1), in place
//	                                   (or, below recomputeN, into the kept block A)
//	  Y_S = A_S·V                      bf16 kernel; A's entries j > i set to 0 first
//
//	backward, per strip:
//	  A_S as the forward made it       (below recomputeN, read back from A)
//	  dV  += A_Sᵀ·dY_S                 bf16 kernel, float32 sums over the strips
//	  G_S  = dY_S·Vᵀ                   bf16 kernel, into the worker's strip buffer
//	  dB_S = s·A_S ⊙ (G_S − rowsum(A_S ⊙ G_S))    SoftmaxRowsBack in place, then s
//	  db  += colsum(dB_S)              dense's bias
//	  dX_S = dB_S·W                    bf16 kernel
//	  dW  += dB_Sᵀ·X_S                 bf16 kernel, float32 sums over the strips
//
// The float32 path fuses logits, softmax and value product in the spec's
// kernels. Rounding and packing a whole [t, t] block per sequence for a
// bf16 product instead costs as much memory traffic as those kernels'
// arithmetic (docs/bf16.md, "Attention in bf16"); a strip's rows are
// rounded while they are in cache. The logits go to the strip buffer, not
// to A's rows: at long2048_dense the AMX kernel's stores into A (16 MB a
// (sequence, head), not in cache) took 57% of the forward, and the step
// ran 6% faster with the strip buffer. From N = recomputeN on, the
// probabilities do not go to A either: the backward makes each strip's
// again, as flash attention does (stripsRecompute), and AttentionMap
// makes them again too (stripProbs). Where A is kept, it holds the
// probabilities after the backward too (the float32 path leaves dB
// there); a mixture's backward leaves dB there (stripTask). Factorized
// dense and the other mixtures keep the float32 path.

// strip is the query rows of one strip: two AMX blocks of 32 rows, eight
// of the AVX512-BF16 and Go levels' 8. dW and dV take one 64-deep product
// a strip (strips of 128 or 256 rows measured no faster, their buffers
// outgrowing L2, nor of 32).
const strip = 64

// stripBF is one worker's packed operands and strip buffers.
type stripBF struct {
	kb  []uint16    // K (or W2) as B panels, a key a column, depth Pad(dh)
	vk  []uint16    // V as B panels, a key a column, depth Pad(dh) (backward)
	vb  []uint16    // V as B panels, a channel a column, depth Pad(N) keys
	kt  []uint16    // K (or W2) as B panels, a channel a column, depth Pad(N) keys (backward)
	sa  []uint16    // the strip as A blocks: Q or dY (depth Pad(dh)), or A or dB (depth Pad(N))
	ta  []uint16    // a strip transposed as A blocks (keys a row), depth strip
	sb  []uint16    // a strip's Q or dY as B panels, a channel a column, depth strip
	tmp []uint16    // PackBT's and PackAT's scratch
	p   []float32   // the strip's logits, then probabilities: strip rows of N
	g   []float32   // the strip's G, then dB (backward): strip rows of N
	rs  [][]float32 // stripTask's random logits
	rw  []float32   // and their weights
}

// bfStrips reports whether the attention runs on the strip path: one
// vanilla or dense component, alone or mixed with random and fixed random
// ones, a bf16 kernel and the spec's SoftmaxRows kernels.
func (m *Model) bfStrips() bool {
	if m.kind != kindSynth || m.eng.BF16Kernel() == nil || m.Kernels.SoftmaxRows == nil || m.Kernels.SoftmaxRowsBack == nil {
		return false
	}
	products := 0
	for _, c := range m.comps {
		switch c {
		case compVanilla, compDense:
			products++
		case compRandom, compFixedRandom:
		default:
			return false
		}
	}
	return products == 1
}

// recomputeN is the least N at which the strip path does not keep the
// probabilities but makes them again in the backward (stripsRecompute); a
// variable so that the tests can take both ways at small N.
var recomputeN = 512

// stripsRecompute reports whether the strip path's backward makes each
// strip's probabilities again, as the forward made them (the product's
// logits and the softmax), rather than reading them back from A: the
// forward then writes nothing to A. Kept, A is written in the forward and
// read in the backward out of cache; making a strip's probabilities again
// costs one product more (the logits) beside the backward's four, and the
// softmax once more. A layer's blocks are 16 MB at mid's size (N 256,
// batch 16), 64 MB at N 1024 (batch 4) and 128 MB at N 2048 (batch 2),
// none of it in cache by the backward. The whole bf16 step measured 4–9%
// faster at N 1024 and 2048 (long*_vanilla, long*_dense), 0–5% at N 512
// (long512_vanilla), and 1.5% slower at N 256 (mid), where packing the
// keys once more per (sequence, head) weighs more against the strips.
func (m *Model) stripsRecompute() bool { return m.n >= recomputeN }

// stripScratch makes sure every worker has its buffers.
func (m *Model) stripScratch() {
	for len(m.strips) < m.Workers() {
		m.strips = append(m.strips, newStripBF(m.eng.BF16Kernel(), m.n, m.dh))
	}
}

// newStripBF returns one worker's buffers for kernel kn, N = n and head
// width dh.
func newStripBF(kn *bf16.Kernel, n, dh int) stripBF {
	kpH, kpN := bf16.Pad(dh), bf16.Pad(n)
	keyPanels, chPanels := (n+bf16.NR-1)/bf16.NR, (dh+bf16.NR-1)/bf16.NR
	keyRows := (n + kn.MR - 1) / kn.MR * kn.MR
	return stripBF{
		kb:  make([]uint16, keyPanels*bf16.BPanel(kpH)),
		vk:  make([]uint16, keyPanels*bf16.BPanel(kpH)),
		vb:  make([]uint16, chPanels*bf16.BPanel(kpN)),
		kt:  make([]uint16, chPanels*bf16.BPanel(kpN)),
		sa:  make([]uint16, strip/kn.MR*kn.ABlock(max(kpH, kpN))),
		ta:  make([]uint16, keyRows*bf16.LDA(strip)),
		sb:  make([]uint16, chPanels*bf16.BPanel(strip)),
		tmp: make([]uint16, bf16.PairsLen(max(dh, keyRows))*bf16.Step/2),
		p:   make([]float32, strip*n),
		g:   make([]float32, strip*n),
	}
}

// stripBackTask is task's backward on worker w: vanilla's into dQ and dK,
// dense's into relu(H·W1ᵀ + b1)'s gradient and the task's partial
// gradient of W2 and b2 (reduced by reduceW2, as the float32 path's); in
// a mixture, each component's mixture-weight term (random's ⟨dB, R_h⟩
// from the dB the strips leave in A; R's gradient is reduceR's, as the
// float32 path's).
func (m *Model) stripBackTask(ws *Workspace, l, w, task int) {
	st := m.stripTask(ws, l, &m.strips[w], task)
	if st.keep {
		st.bp = m.scratch[w]
	}
	b := st.base
	var dx, dw, dbias []float32
	pi := 0 // the product component
	for mi, c := range m.comps {
		switch c {
		case compVanilla:
			dx, dw, pi = ws.dq[b:], ws.dk[b:], mi
		case compDense:
			stride := m.n*m.dh + m.n
			p := ws.pW2[task*stride : task*stride+stride]
			dx, dw, dbias, pi = ws.dg[b:], p[:m.n*m.dh], p[m.n*m.dh:], mi
		}
	}
	st.backward(ws.dy[b:], dx, dw, dbias, ws.dv[b:], m.Kernels.SoftmaxRows, m.Kernels.SoftmaxRowsBack)
	if !st.keep {
		return
	}
	nc, r := len(m.comps), 0
	for mi := range m.comps {
		if mi == pi {
			ws.pMix[task*nc+mi] = m.Kernels.TriDot(st.t, st.a, st.bp)
			continue
		}
		ws.pMix[task*nc+mi] = m.Kernels.TriDot(st.t, st.a, st.rs[r])
		r++
	}
}

// stripTask is one (sequence, head)'s operands on the strip path. The
// logits are those of the spec's Product kernels, scale·X·Wᵀ + bias:
// vanilla's X = Q, W = K (the sequence's keys), scale 1/√dh, no bias;
// dense's X = relu(H·W1ᵀ + b1), W = W2 (shared by the sequences), scale
// 1, bias b2.
type stripTask struct {
	kn          *bf16.Kernel
	sc          *stripBF
	t, d, dh, n int
	kpH, kpN    int
	causal      bool
	scale       float32
	x, w        []float32 // X's rows d apart, W's ldw
	ldw         int
	bias        []float32 // nil: none
	v, a        []float32
	base        int // the head's offset in the [rows, d] activations
	// A mixture: the product's weight wp (1 alone), and the random
	// components' logits R_h (rows N apart) and weights.
	wp   float32
	rs   [][]float32
	rw   []float32
	keep bool      // a mixture: the backward leaves dB in A, for R's gradient and the weights'
	bp   []float32 // a mixture: the worker's [N, N] scratch, for the product's logits
	// recompute: the forward keeps no probabilities in A; the backward
	// makes them again (stripsRecompute).
	recompute bool
}

// stripTask returns task's operands in layer l, with worker buffers sc.
func (m *Model) stripTask(ws *Workspace, l int, sc *stripBF, task int) stripTask {
	ly, lw := &m.layers[l], &ws.lay[l]
	t, d, dh, nn := ws.t, m.d, m.dh, m.n*m.n
	base := task/m.heads*t*d + task%m.heads*dh
	st := stripTask{
		kn: m.eng.BF16Kernel(), sc: sc,
		t: t, d: d, dh: dh, n: m.n, kpH: bf16.Pad(dh), kpN: bf16.Pad(m.n),
		causal: m.Spec.Causal(), scale: 1, wp: 1,
		v: lw.v[base:], base: base,
		keep: len(m.comps) > 1, recompute: m.stripsRecompute(), rs: sc.rs[:0], rw: sc.rw[:0],
	}
	for mi, c := range m.comps {
		switch c {
		case compVanilla:
			st.x, st.w, st.ldw = lw.q[base:], lw.k[base:], d
			st.scale = float32(1 / math.Sqrt(float64(dh)))
		case compDense:
			st.x, st.w, st.ldw, st.bias = lw.g[base:], ly.w2.w.Data, dh, ly.w2.b.Data
		default: // random, fixed random
			st.rs = append(st.rs, m.compLogits(c, ly, lw, t, 0, task%m.heads, nil))
			st.rw = append(st.rw, lw.w[mi])
			continue
		}
		if st.keep {
			st.wp = lw.w[mi]
		}
	}
	if lw.a != nil { // nil when nothing keeps A (keepsProbs)
		st.a = lw.a[task*nn : task*nn+nn]
	}
	sc.rs, sc.rw = st.rs, st.rw // kept: no allocation next time
	return st
}

// stripProbs writes task's probabilities in layer l of the last forward
// on ws to dst, a t×t row-major matrix (row i's entries j ≤ i; j < t
// unmasked), made again as the forward made them: from N = recomputeN the
// strip path does not keep them. It uses buffers of its own, not a
// worker's, so that it reads the model and ws only.
func (m *Model) stripProbs(ws *Workspace, l, task int, dst []float32) {
	sc := newStripBF(m.eng.BF16Kernel(), m.n, m.dh)
	st := m.stripTask(ws, l, &sc, task)
	t, n := st.t, st.n
	st.packKeys(sc.kb, st.w, st.ldw)
	for i0 := 0; i0 < t; i0 += strip {
		i1 := min(i0+strip, t)
		st.probs(i0, i1, m.Kernels.SoftmaxRows, sc.p, nil)
		for i := i0; i < i1; i++ {
			copy(dst[i*t:i*t+st.keys(i+1)], sc.p[(i-i0)*n:])
		}
	}
}

// keys is the number of keys rows [i0, i1) read: i1 under the causal mask.
func (st *stripTask) keys(i1 int) int {
	if st.causal {
		return i1
	}
	return st.t
}

// packKeys packs src's t rows (ld apart, dh wide) as B panels with a key a
// column, depth Pad(dh).
func (st *stripTask) packKeys(dst []uint16, src []float32, ld int) {
	bp := bf16.BPanel(st.kpH)
	for j0 := 0; j0 < st.t; j0 += bf16.NR {
		bf16.PackB(dst[j0/bf16.NR*bp:], src, ld, 1, j0, st.t, st.dh, st.kpH)
	}
}

// packRows packs rows [i0, i1) of src (stride ld, kk wide) as the strip's
// A blocks, depth kp, columns [0, Pad(kk)) written.
func (st *stripTask) packRows(src []float32, ld, i0, i1, kk, kp int) {
	packStrip(st.kn, st.sc.sa, bf16.LDA(kp), 0, src, ld, i0, i1, kk)
}

// packStrip packs rows [i0, i1) of src (stride ld, kk wide) on kernel kn
// as a strip's A blocks in dst, rows lda apart, at columns [off,
// off+Pad(kk)): the strip paths' A operands, and the shared path's dY_s
// side by side (off = s·Pad(dh)).
func packStrip(kn *bf16.Kernel, dst []uint16, lda, off int, src []float32, ld, i0, i1, kk int) {
	ab := kn.MR * lda
	for b := 0; b*kn.MR < i1-i0; b++ {
		kn.PackASeg(dst[b*ab:], lda, off, src, ld, 1, i0+b*kn.MR, i1, kk, bf16.Pad(kk))
	}
}

// forward is task's forward, every strip.
func (st *stripTask) forward(y []float32, softmax func(t, i0, i1 int, b, a []float32)) {
	kn, sc, n := st.kn, st.sc, st.n
	st.packKeys(sc.kb, st.w, st.ldw)
	bf16.PackBT(sc.vb, st.v, st.d, st.dh, st.t, st.kpN, 0, st.kpN, sc.tmp)
	for i0 := 0; i0 < st.t; i0 += strip {
		i1 := min(i0+strip, st.t)
		rows, keys := i1-i0, st.keys(i1)
		ps := sc.p
		if !st.recompute {
			ps = st.a[i0*n:]
		}
		st.probs(i0, i1, softmax, ps, nil)
		st.packRows(ps, n, 0, rows, keys, st.kpN)
		kn.TileRow(st.kpN, 0, bf16.Pad(keys), sc.sa, sc.vb, y[i0*st.d:], st.d, rows, st.dh)
	}
}

// productLogits writes strip [i0, i1)'s product logits B'_S = s·X_S·Wᵀ
// + b to dst (rows N apart) from W packed in sc.kb, keys(i1) of each row.
func (st *stripTask) productLogits(i0, i1 int, dst []float32) {
	kn, n := st.kn, st.n
	rows, keys := i1-i0, st.keys(i1)
	st.packRows(st.x, st.d, i0, i1, st.dh, st.kpH)
	kn.TileRow(st.kpH, 0, st.kpH, st.sc.sa, st.sc.kb, dst, n, rows, keys)
	if st.scale != 1 || st.bias != nil {
		for r := 0; r < rows; r++ {
			kn.ScaleAdd(dst[r*n:r*n+keys], st.scale, st.bias, 1)
		}
	}
}

// probs writes strip [i0, i1)'s probabilities A_S = softmax(B_S) to dst
// (rows N apart; the worker's strip buffer p itself, or A's rows), 0
// above the diagonal up to key i1 (causal). B_S is made in p: B'_S, and
// in a mixture wp·B'_S + Σ wr·R_S. The forward and the backward's
// recomputation call it on the same operands, and make the same bits.
// With bp (a mixture's backward), B'_S goes to bp's rows [i0, i1) too.
func (st *stripTask) probs(i0, i1 int, softmax func(t, i0, i1 int, b, a []float32), dst, bp []float32) {
	kn, n := st.kn, st.n
	rows, keys := i1-i0, st.keys(i1)
	lg := st.sc.p
	st.productLogits(i0, i1, lg)
	if bp != nil {
		for r := 0; r < rows; r++ {
			copy(bp[(i0+r)*n:(i0+r)*n+keys], lg[r*n:r*n+keys])
		}
	}
	for m, rm := range st.rs {
		w := float32(1)
		if m == 0 {
			w = st.wp // B = wp·B' + wr·R, at once
		}
		for i := i0; i < i1; i++ {
			kn.ScaleAdd(lg[(i-i0)*n:(i-i0)*n+keys], w, rm[i*n:], st.rw[m])
		}
	}
	if len(st.rs) == 0 && st.wp != 1 {
		for r := 0; r < rows; r++ {
			kn.ScaleAdd(lg[r*n:r*n+keys], st.wp, nil, 0)
		}
	}
	softmax(st.t, i0, i1, lg, dst)
	if st.causal { // A·V reads keys < i1: 0 above the diagonal
		for i := i0; i < i1; i++ {
			clear(dst[(i-i0)*n+i+1 : (i-i0)*n+keys])
		}
	}
}

// backward is task's backward, every strip: dx overwritten (rows d apart),
// dw (rows ldw apart), dbias (nil without a bias) and dv cleared and
// summed over the strips. In a mixture the gradients are the product's
// weight times its own, and A is left holding dB (the mixture logits'
// gradient) and st.bp the product's logits B' = s·X·Wᵀ + b, made again as
// the forward made them, for its mixture-weight term ⟨dB, B'⟩. dB's rows
// sum to 0, so that sum cancels: it reads the forward's B' and the float32
// dB, not dB rounded to bf16 (⟨dX', X⟩ from the product dX' = bf16(dB)·W,
// as vanillaMixBack reads the float32 path's dX, is off by bf16's 2⁻⁸ of
// Σ|dB|·|B'|, which can exceed the sum itself).
func (st *stripTask) backward(dy, dx, dw, dbias, dv []float32, softmax func(t, i0, i1 int, b, a []float32), softmaxBack func(t, i0, i1 int, a, g, db []float32)) {
	kn, sc, n, d, dh := st.kn, st.sc, st.n, st.d, st.dh
	st.packKeys(sc.vk, st.v, d)
	bf16.PackBT(sc.kt, st.w, st.ldw, dh, st.t, st.kpN, 0, st.kpN, sc.tmp)
	if st.recompute || st.keep { // for the logits made again
		st.packKeys(sc.kb, st.w, st.ldw)
	}
	for i := 0; i < st.t; i++ {
		clear(dw[i*st.ldw : i*st.ldw+dh])
		clear(dv[i*d : i*d+dh])
	}
	if dbias != nil {
		clear(dbias[:st.t])
	}
	bpS := bf16.BPanel(strip)
	for i0 := 0; i0 < st.t; i0 += strip {
		i1 := min(i0+strip, st.t)
		rows, keys := i1-i0, st.keys(i1)
		kl := bf16.Pad(keys)
		var as []float32 // A's strip, where A is kept
		if st.a != nil {
			as = st.a[i0*n:]
		}
		ps := sc.p
		switch {
		case st.recompute:
			st.probs(i0, i1, softmax, ps, st.bp)
		case st.keep:
			ps = as
			st.productLogits(i0, i1, st.bp[i0*n:])
		default:
			ps = as
		}
		// dV += A_Sᵀ·dY_S.
		kn.PackAT(sc.ta, ps, n, keys, rows, strip, 0, strip, sc.tmp)
		bf16.PackBT(sc.sb, dy[i0*d:], d, dh, rows, strip, 0, strip, sc.tmp)
		for c := 0; c < dh; c += bf16.NR {
			kn.Tile(strip, 0, strip, sc.ta, sc.sb[c/bf16.NR*bpS:], dv[c:], d, keys, min(bf16.NR, dh-c), dv[c:], nil)
		}
		// G_S = dY_S·Vᵀ, then dB_S in place, times the logits' scale.
		st.packRows(dy, d, i0, i1, dh, st.kpH)
		g := sc.g
		kn.TileRow(st.kpH, 0, st.kpH, sc.sa, sc.vk, g, n, rows, keys)
		softmaxBack(st.t, i0, i1, ps, g, g)
		for i := i0; i < i1; i++ {
			r := g[(i-i0)*n : (i-i0)*n+keys]
			w := keys
			if st.causal {
				w = i + 1
				clear(r[w:]) // G's entries above the diagonal: dB is 0 there
			}
			if st.keep {
				copy(as[(i-i0)*n:], r[:w])
			}
			if st.scale != 1 {
				kn.ScaleAdd(r[:w], st.scale, nil, 0)
			}
			if dbias != nil {
				kn.ScaleAdd(dbias[:w], 1, r, 1)
			}
		}
		// dX_S = dB_S·W.
		st.packRows(g, n, 0, rows, keys, st.kpN)
		kn.TileRow(st.kpN, 0, kl, sc.sa, sc.kt, dx[i0*d:], d, rows, dh)
		if st.keep {
			for i := i0; i < i1; i++ {
				kn.ScaleAdd(dx[i*d:i*d+dh], st.wp, nil, 0)
			}
		}
		// dW += dB_Sᵀ·X_S.
		kn.PackAT(sc.ta, g, n, keys, rows, strip, 0, strip, sc.tmp)
		bf16.PackBT(sc.sb, st.x[i0*d:], d, dh, rows, strip, 0, strip, sc.tmp)
		for c := 0; c < dh; c += bf16.NR {
			kn.Tile(strip, 0, strip, sc.ta, sc.sb[c/bf16.NR*bpS:], dw[c:], st.ldw, keys, min(bf16.NR, dh-c), dw[c:], nil)
		}
	}
	if !st.keep {
		return
	}
	for i := 0; i < st.t; i++ {
		kn.ScaleAdd(dw[i*st.ldw:i*st.ldw+dh], st.wp, nil, 0)
	}
	if dbias != nil {
		kn.ScaleAdd(dbias[:st.t], st.wp, nil, 0)
	}
}
