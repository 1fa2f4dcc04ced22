package model

import (
	"fmt"
	"math"

	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/mat"
)

// The Synthesizer's attention on the bf16 path (SetBF16, with the spec's
// SoftmaxRows kernels). The float32 path fuses the softmax with the value
// product (SoftmaxValue) and its backward with dY·Vᵀ and Pᵀ·dY
// (SoftmaxValueBack); here the softmax and its backward run alone on the
// float32 kernels, and the three products on the bf16 kernel (mat's
// MulBatchBF16: P and the other operands rounded to bf16, sums in
// float32), all of a layer's (sequence, head) products in one job each:
//
//	forward:  P = softmax(B) (SoftmaxRows)           Y = P·V        (LowerA: the causal triangle's blocks only)
//	backward: G = dY·Vᵀ (LowerC)   dV = Pᵀ·dY (UpperA)   dB = P ⊙ (G − rowsum(P ⊙ G)) (SoftmaxRowsBack)
//
// A layer with one random or fixed random component has the same P for
// every sequence (softmax of R's head rows): its forward takes the softmax
// once per head (kept in sequence 0's block) and its products read that P
// packed once, and its backward sums G over the sequences in one product,
// Σ_s dY_s·V_sᵀ, before one SoftmaxRowsBack per head, which is R's
// gradient (fixed random has none: dV only). The sums are the same
// functions of the inputs as the per-sequence path's, in another order.

// bfAttention reports whether the attention runs on the bf16 path.
func (m *Model) bfAttention() bool {
	return m.kind == kindSynth && m.eng.BF16() != bf16.None &&
		m.Kernels.SoftmaxRows != nil && m.Kernels.SoftmaxRowsBack != nil
}

// sharedRandom reports whether the layers' attention probabilities are
// the same for every sequence: one random or fixed random component.
func (m *Model) sharedRandom() bool {
	return len(m.comps) == 1 && (m.comps[0] == compRandom || m.comps[0] == compFixedRandom)
}

// triangles are the bf16 products' triangles: the causal ones, or none
// for a bidirectional spec.
func (m *Model) triangles() (lowerA, upperA, lowerC mat.Tri) {
	if m.Spec.Causal() {
		return mat.LowerA, mat.UpperA, mat.LowerC
	}
	return mat.Full, mat.Full, mat.Full
}

// batchProds returns m's reused list of n products of segs segments each
// (A and B), their segment slices cut from one backing array.
func (m *Model) batchProds(n, segs int) []mat.BatchProd {
	if cap(m.bfProds) < n {
		m.bfProds = make([]mat.BatchProd, n)
	}
	if cap(m.bfSegs) < 2*n*segs {
		m.bfSegs = make([]mat.Strided, 2*n*segs)
	}
	ps, sg := m.bfProds[:n], m.bfSegs[:2*n*segs]
	for i := range ps {
		ps[i] = mat.BatchProd{A: sg[2*i*segs : (2*i+1)*segs], B: sg[(2*i+1)*segs : (2*i+2)*segs]}
	}
	return ps
}

// mulBatch runs prods on the bf16 kernel. Its errors are the model's own
// mistakes (sizes it computed), so they panic.
func (m *Model) mulBatch(rows, cols, k int, tri mat.Tri, alpha float32, prods []mat.BatchProd) {
	if err := m.eng.MulBatchBF16(rows, cols, k, tri, alpha, prods); err != nil {
		panic(fmt.Sprintf("model: attention on the bf16 path: %v", err))
	}
	clear(prods) // no operands kept
}

// probs returns the probabilities block of sequence s and head h in the
// layer's kept attention (one per head when the forward shared it).
func (m *Model) probs(ws *Workspace, lw *layerWS, s, h int) []float32 {
	if ws.sharedP {
		s = 0
	}
	nn := m.n * m.n
	tk := s*m.heads + h
	return lw.a[tk*nn : tk*nn+nn]
}

// compIndex returns the index of component c in the mixture, -1 if absent.
func (m *Model) compIndex(c comp) int {
	for i, x := range m.comps {
		if x == c {
			return i
		}
	}
	return -1
}

// vanillaScale is vanilla's 1/√dh.
func (m *Model) vanillaScale() float32 { return float32(1 / math.Sqrt(float64(m.dh))) }

func (m *Model) attentionForwardBF16(ws *Workspace, l int) {
	lw := &ws.lay[l]
	t, d, dh, n := ws.t, m.d, m.dh, m.n
	ws.bfAttn, ws.sharedP = true, m.sharedRandom()
	tasks := ws.b * m.heads
	if ws.sharedP {
		tasks = m.heads // sequence 0's: task h
	}
	if m.compIndex(compVanilla) >= 0 {
		// Vanilla's logits scale·Q·Kᵀ, each task's into its block of attnG,
		// which the softmax job reads (attnFwdJob.logits).
		_, _, lowerC := m.triangles()
		g := ws.attnGrad(tasks)
		prods := m.batchProds(tasks, 1)
		for tk := range prods {
			base := tk/m.heads*t*d + tk%m.heads*dh
			p := &prods[tk]
			p.C, p.LDC = g[tk*n*n:], n
			p.A[0] = mat.Strided{Data: lw.q[base:], RS: d, CS: 1}
			p.B[0] = mat.Strided{Data: lw.k[base:], RS: d, CS: 1}
		}
		m.mulBatch(t, t, dh, lowerC, m.vanillaScale(), prods)
	}
	m.jobs.attnF = attnFwdJob{m: m, ws: ws, l: l, rows: true}
	m.run(tasks, &m.jobs.attnF)
	m.jobs.attnF = attnFwdJob{}
	lowerA, _, _ := m.triangles()
	prods := m.batchProds(ws.b*m.heads, 1)
	for s := 0; s < ws.b; s++ {
		for h := 0; h < m.heads; h++ {
			base := s*t*d + h*dh
			p := &prods[s*m.heads+h]
			p.C, p.LDC = lw.y[base:], d
			p.A[0] = mat.Strided{Data: m.probs(ws, lw, s, h), RS: n, CS: 1}
			p.B[0] = mat.Strided{Data: lw.v[base:], RS: 1, CS: d}
		}
	}
	m.mulBatch(t, dh, t, lowerA, 1, prods)
}

// attnGrad returns the workspace's buffer of ∂loss/∂P, blocks of [N, N]
// for n of them, allocated on first use (the float32 path has none).
func (ws *Workspace) attnGrad(blocks int) []float32 {
	nn := ws.m.n * ws.m.n
	if len(ws.attnG) < blocks*nn {
		ws.attnG = mat.Alloc(blocks * nn)
	}
	return ws.attnG[:blocks*nn]
}

// dvProds fills prods with dV = Pᵀ·dY for every (sequence, head).
func (m *Model) dvProds(ws *Workspace, lw *layerWS, prods []mat.BatchProd) {
	t, d, dh, n := ws.t, m.d, m.dh, m.n
	for s := 0; s < ws.b; s++ {
		for h := 0; h < m.heads; h++ {
			base := s*t*d + h*dh
			p := &prods[s*m.heads+h]
			p.C, p.LDC = ws.dv[base:], d
			p.A[0] = mat.Strided{Data: m.probs(ws, lw, s, h), RS: 1, CS: n}
			p.B[0] = mat.Strided{Data: ws.dy[base:], RS: 1, CS: d}
		}
	}
}

// attentionBackwardBF16 is the per-(sequence, head) backward: G and dV
// on the bf16 kernel, then each task's SoftmaxRowsBack and its
// components' backward (attnBackJob), leaving dB in the task's block.
func (m *Model) attentionBackwardBF16(ws *Workspace, l int) {
	lw := &ws.lay[l]
	t, d, dh, n := ws.t, m.d, m.dh, m.n
	tasks := ws.b * m.heads
	_, upperA, lowerC := m.triangles()
	g := ws.attnGrad(tasks)
	prods := m.batchProds(tasks, 1)
	for s := 0; s < ws.b; s++ {
		for h := 0; h < m.heads; h++ {
			base := s*t*d + h*dh
			tk := s*m.heads + h
			p := &prods[tk]
			p.C, p.LDC = g[tk*n*n:], n
			p.A[0] = mat.Strided{Data: ws.dy[base:], RS: d, CS: 1}
			p.B[0] = mat.Strided{Data: lw.v[base:], RS: d, CS: 1}
		}
	}
	m.mulBatch(t, t, dh, lowerC, 1, prods)
	prods = m.batchProds(tasks, 1)
	m.dvProds(ws, lw, prods)
	m.mulBatch(t, dh, t, upperA, 1, prods)
	m.jobs.attnB = attnBackJob{m: m, ws: ws, l: l, g: g}
	m.run(tasks, &m.jobs.attnB)
	m.jobs.attnB = attnBackJob{}
	if m.compIndex(compVanilla) < 0 {
		return
	}
	// Vanilla: dQ = scale·dB·K and dK = scale·dBᵀ·Q from each task's dB
	// (zero above the diagonal: SoftmaxRows' zeros, which SoftmaxRowsBack
	// leaves), then, in a mixture, its weight's gradient and factor.
	lowerA, upperA, _ := m.triangles()
	for pass := 0; pass < 2; pass++ {
		prods = m.batchProds(tasks, 1)
		for tk := range prods {
			base := tk/m.heads*t*d + tk%m.heads*dh
			a := lw.a[tk*n*n : tk*n*n+n*n]
			p := &prods[tk]
			if pass == 0 {
				p.C, p.LDC = ws.dq[base:], d
				p.A[0] = mat.Strided{Data: a, RS: n, CS: 1}
				p.B[0] = mat.Strided{Data: lw.k[base:], RS: 1, CS: d}
			} else {
				p.C, p.LDC = ws.dk[base:], d
				p.A[0] = mat.Strided{Data: a, RS: 1, CS: n}
				p.B[0] = mat.Strided{Data: lw.q[base:], RS: 1, CS: d}
			}
		}
		tri := lowerA
		if pass == 1 {
			tri = upperA
		}
		m.mulBatch(t, dh, t, tri, m.vanillaScale(), prods)
	}
	if len(m.comps) > 1 {
		m.jobs.red = reduceJob{m: m, ws: ws, l: l, op: reduceVanilla}
		m.run(tasks, &m.jobs.red)
		m.jobs.red = reduceJob{}
	}
}

// vanillaMixBF16 finishes vanilla's share of a mixture's backward for task
// (s, h) on the bf16 path: dq and dk hold scale·dB·K and scale·dBᵀ·Q for
// the mixture's dB, so ⟨dB, B^(vanilla)⟩ = ⟨dq, Q⟩ (B^(vanilla) =
// scale·Q·Kᵀ) is the mixture weight's term, and dq, dk are then scaled
// by the weight w.
func (m *Model) vanillaMixBF16(ws *Workspace, lw *layerWS, task int) {
	t, d, dh := ws.t, m.d, m.dh
	vi := m.compIndex(compVanilla)
	w := lw.w[vi]
	base := task/m.heads*t*d + task%m.heads*dh
	var dot float64
	for i := 0; i < t; i++ {
		dq := ws.dq[base+i*d : base+i*d+dh]
		q := lw.q[base+i*d : base+i*d+dh]
		q = q[:len(dq)]
		var r float32
		for c, v := range dq {
			r += v * q[c]
		}
		dot += float64(r)
		dk := ws.dk[base+i*d : base+i*d+dh]
		for c := range dq {
			dq[c] *= w
		}
		for c := range dk {
			dk[c] *= w
		}
	}
	ws.pMix[task*len(m.comps)+vi] = float32(dot)
}

// sharedBackwardBF16 is the backward of a layer whose P is shared by the
// sequences (one random or fixed random component): dV from the shared P,
// and R's gradient from G summed over the sequences, one SoftmaxRowsBack
// per head written straight into R's gradient (j ≤ i; the rest stays 0).
func (m *Model) sharedBackwardBF16(ws *Workspace, l int) {
	ly, lw := &m.layers[l], &ws.lay[l]
	t, d, dh, n := ws.t, m.d, m.dh, m.n
	_, upperA, lowerC := m.triangles()
	prods := m.batchProds(ws.b*m.heads, 1)
	m.dvProds(ws, lw, prods)
	m.mulBatch(t, dh, t, upperA, 1, prods)
	if ly.r == nil || ly.r.Frozen {
		return
	}
	g := ws.attnGrad(m.heads)
	prods = m.batchProds(m.heads, ws.b)
	for h := 0; h < m.heads; h++ {
		p := &prods[h]
		p.C, p.LDC = g[h*n*n:], n
		for s := 0; s < ws.b; s++ {
			base := s*t*d + h*dh
			p.A[s] = mat.Strided{Data: ws.dy[base:], RS: d, CS: 1}
			p.B[s] = mat.Strided{Data: lw.v[base:], RS: d, CS: 1}
		}
	}
	m.mulBatch(t, t, dh, lowerC, 1, prods)
	m.jobs.red = reduceJob{m: m, ws: ws, l: l, op: reduceShared}
	m.run(m.heads, &m.jobs.red)
	m.jobs.red = reduceJob{}
}
