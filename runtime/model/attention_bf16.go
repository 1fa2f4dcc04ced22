package model

import (
	"fmt"

	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/mat"
)

// The attention of random, fixed random and factorized random on the bf16
// path (SetBF16, with the spec's SoftmaxRows kernels). Their logits B_h
// (R_h, or R1_h·R2_hᵀ) do not depend on the input, so neither do the
// probabilities P = softmax(B_h): they are the same for every sequence of
// a batch. This path computes them once per head and layer (the logits,
// then SoftmaxRows, float32), keeps them in sequence 0's block, and runs
// the products on the bf16 kernel (mat's MulBatchBF16: operands rounded to
// bf16, sums in float32), each layer's in one job a product:
//
//	forward:  Y_s = P·V_s                         every sequence s, P packed once (LowerA: the causal triangle's blocks)
//	backward: dV_s = Pᵀ·dY_s                      (UpperA)
//	          G = Σ_s dY_s·V_sᵀ                   one product of b segments a head (LowerC)
//	          dB = P ⊙ (G − rowsum(P ⊙ G))        SoftmaxRowsBack: random's straight into R's gradient;
//	          dR1 = dB·R2, dR2 = dBᵀ·R1           factorized random's, once a head (FactRandomLogitsBackX, BackW)
//
// The float32 path fuses the softmax with the value product per sequence
// (SoftmaxValue, SoftmaxValueBack) and sums the gradients over the
// sequences; they are the same function of the inputs, summed in another
// order. Fixed random has no gradient: its backward is dV alone.
//
// Vanilla's and dense's attention, whose P is a sequence's own, runs a
// strip of rows at a time instead (strips_bf16.go). Factorized dense and
// the mixtures keep the fused float32 kernels on the bf16 path.

// bfAttention reports whether the attention runs on the bf16 path: one
// random, fixed random or factorized random component, a bf16 kernel and
// the spec's SoftmaxRows kernels.
func (m *Model) bfAttention() bool {
	return m.kind == kindSynth && len(m.comps) == 1 &&
		(m.comps[0] == compRandom || m.comps[0] == compFixedRandom || m.comps[0] == compFactRandom) &&
		m.eng.BF16() != bf16.None && m.Kernels.SoftmaxRows != nil && m.Kernels.SoftmaxRowsBack != nil
}

// sharedGrads reports whether the bf16 path's backward needs G = Σ_s
// dY_s·V_sᵀ: some layer trains R (random), or the logits' factors
// (factorized random).
func (m *Model) sharedGrads() bool {
	for l := range m.layers {
		if r := m.layers[l].r; r != nil && !r.Frozen || m.layers[l].r1 != nil {
			return true
		}
	}
	return false
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
func (m *Model) mulBatch(rows, cols, k int, tri mat.Tri, prods []mat.BatchProd) {
	if err := m.eng.MulBatchBF16(rows, cols, k, tri, prods); err != nil {
		panic(fmt.Sprintf("model: attention on the bf16 path: %v", err))
	}
	clear(prods) // no operands kept
}

// probs returns the probabilities block of sequence s and head h in the
// layer's kept attention (sequence 0's when the forward shared it).
func (m *Model) probs(ws *Workspace, lw *layerWS, s, h int) []float32 {
	if ws.sharedP {
		s = 0
	}
	nn := m.n * m.n
	tk := s*m.heads + h
	return lw.a[tk*nn : tk*nn+nn]
}

// sharedForwardBF16 is the forward: P once per head, then every Y_s.
func (m *Model) sharedForwardBF16(ws *Workspace, l int) {
	lw := &ws.lay[l]
	t, d, dh, n := ws.t, m.d, m.dh, m.n
	m.jobs.attnF = attnFwdJob{m: m, ws: ws, l: l, rows: true}
	m.run(m.heads, &m.jobs.attnF) // task h: sequence 0's
	m.jobs.attnF = attnFwdJob{}
	lowerA, _, _ := m.triangles()
	m.mulBatch(t, dh, t, lowerA, m.perHead(ws, func(p *mat.BatchProd, s, h, base int) {
		p.C, p.LDC = lw.y[base:], d
		p.A[0] = mat.Strided{Data: m.probs(ws, lw, s, h), RS: n, CS: 1}
		p.B[0] = mat.Strided{Data: lw.v[base:], RS: 1, CS: d}
	}))
}

// perHead returns a product for each (sequence, head), in task order,
// filled by fill (base: the head's offset in the [rows, d] activations).
func (m *Model) perHead(ws *Workspace, fill func(p *mat.BatchProd, s, h, base int)) []mat.BatchProd {
	prods := m.batchProds(ws.b*m.heads, 1)
	for s := 0; s < ws.b; s++ {
		for h := 0; h < m.heads; h++ {
			fill(&prods[s*m.heads+h], s, h, s*ws.t*m.d+h*m.dh)
		}
	}
	return prods
}

// sharedBackwardBF16 is the backward: dV from the shared P, and R's
// gradient from G summed over the sequences, one SoftmaxRowsBack per head
// written straight into R's gradient (j ≤ i; the rest stays 0).
func (m *Model) sharedBackwardBF16(ws *Workspace, l int) {
	ly, lw := &m.layers[l], &ws.lay[l]
	t, d, dh, n := ws.t, m.d, m.dh, m.n
	_, upperA, lowerC := m.triangles()
	m.mulBatch(t, dh, t, upperA, m.perHead(ws, func(p *mat.BatchProd, s, h, base int) {
		p.C, p.LDC = ws.dv[base:], d
		p.A[0] = mat.Strided{Data: m.probs(ws, lw, s, h), RS: 1, CS: n}
		p.B[0] = mat.Strided{Data: ws.dy[base:], RS: 1, CS: d}
	}))
	fact := ly.r1 != nil
	if !fact && (ly.r == nil || ly.r.Frozen) {
		return
	}
	nn := n * n
	ws.attnBlocks(m.heads)
	prods := m.batchProds(m.heads, ws.b)
	for h := 0; h < m.heads; h++ {
		p := &prods[h]
		p.C, p.LDC = ws.attnG[h*nn:], n
		for s := 0; s < ws.b; s++ {
			base := s*t*d + h*dh
			p.A[s] = mat.Strided{Data: ws.dy[base:], RS: d, CS: 1}
			p.B[s] = mat.Strided{Data: lw.v[base:], RS: d, CS: 1}
		}
	}
	m.mulBatch(t, t, dh, lowerC, prods)
	if fact {
		m.reduce(ws, l, reduceSharedFact, m.heads)
		return
	}
	m.reduce(ws, l, reduceShared, m.heads)
}

// attnBlocks makes ws.attnG hold at least n blocks of [N, N], allocated on
// first use (the float32 path has none).
func (ws *Workspace) attnBlocks(n int) {
	if nn := ws.m.n * ws.m.n; len(ws.attnG) < n*nn {
		ws.attnG = mat.Alloc(n * nn)
	}
}
