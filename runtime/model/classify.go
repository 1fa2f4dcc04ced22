package model

import (
	"fmt"
	"math"
	"runtime"
	"slices"
)

// A classifier (spec task "classify", the card's "Encoders and
// classification") runs the same blocks, then
//
//	h      = lnf(x)                        [t, d]
//	pooled = mean over i < t of h[i]       [d]
//	logits = head(pooled)                  head: linear d → classes
//	loss   = cross-entropy(logits, label)  mean over the batch's sequences
//
// tok_emb is then only the input embedding. The head is small (classes·d),
// so it runs in the calling goroutine, its sums in float64 in a fixed order.
//
// Sequences of different lengths: ForwardClassify takes sequences of one
// length t (each sequence's own; no padding exists, so none can enter a
// softmax, a sum or the pooling). ClassifyBatch takes sequences of any
// lengths ≤ N: it groups them by length (shortest first, file order within
// a length) and runs one forward (and backward) pass per group, summing
// the groups' gradients in that order with each group's head gradient
// divided by the whole batch's size, so the result is the gradient of the
// mean loss over the whole batch. This works unchanged for every variant
// (the attention kernels run at the group's t) and for causal and
// bidirectional specs alike; the cost is one pass per distinct length in a
// batch.

// Classes is a classifier's number of classes K, 0 for a language model.
func (m *Model) Classes() int { return m.classes }

// ForwardClassify runs the classifier on batch sequences of one length:
// inputs holds batch·t tokens, sequence-major (t = len(inputs)/batch,
// 1 ≤ t ≤ N). With labels (batch classes in [0, Classes)), it returns the
// mean cross-entropy in nats over the sequences and a Backward may follow;
// with labels nil it returns 0. The logits are available through
// ws.ClassLogits until the next pass. It returns NaN when interrupted.
// Misuse (a language model, sizes, tokens or labels out of range) panics.
func (m *Model) ForwardClassify(ws *Workspace, inputs, labels []int32, batch int) float64 {
	if m.classes == 0 {
		panic(fmt.Sprintf("model: ForwardClassify: spec %q is a language model, not a classifier", m.Spec.Name))
	}
	m.checkInputs("ForwardClassify", ws, inputs, batch)
	if labels != nil && len(labels) != batch {
		panic(fmt.Sprintf("model: ForwardClassify: %d labels for %d sequences", len(labels), batch))
	}
	for i, v := range labels {
		if v < 0 || int(v) >= m.classes {
			panic(fmt.Sprintf("model: ForwardClassify: labels[%d] = %d is out of the classes [0, %d)", i, v, m.classes))
		}
	}
	loss := m.forwardClassify(ws, inputs, labels, batch)
	if ws.fwdDone {
		k := m.classes
		for i := 0; i < batch; i++ {
			ws.order[i] = int32(i)
		}
		copy(ws.outLogits[:batch*k], ws.clogits[:batch*k])
		ws.nClass = batch
	}
	return loss
}

// forwardClassify is ForwardClassify without the checks and without
// ClassLogits' bookkeeping.
func (m *Model) forwardClassify(ws *Workspace, inputs, labels []int32, batch int) float64 {
	defer runtime.KeepAlive(m)
	ws.nClass = 0
	ws.hasTargets = labels != nil
	if ws.hasTargets {
		copy(ws.labels, labels)
	}
	if !m.forwardBody(ws, inputs, batch, false) {
		return math.NaN()
	}
	ws.ceDiv = float64(batch)
	m.classifyForward(ws)
	ws.fwdDone = true
	if !ws.hasTargets {
		return 0
	}
	sum := 0.0
	for _, v := range ws.seqNLL[:batch] {
		sum += v
	}
	return sum / float64(batch)
}

// classifyForward pools lnf's output ws.xf per sequence, applies the head
// and, with labels, the cross-entropy.
func (m *Model) classifyForward(ws *Workspace) {
	d, k, t := m.d, m.classes, ws.t
	w, bias := m.headW.Data, m.headB.Data
	for b := 0; b < ws.b; b++ {
		pooled := ws.pooled[b*d : b*d+d]
		x := ws.xf[b*t*d : (b+1)*t*d]
		for c := 0; c < d; c++ {
			s := 0.0
			for i := 0; i < t; i++ {
				s += float64(x[i*d+c])
			}
			pooled[c] = float32(s / float64(t))
		}
		z := ws.cprob[b*k : b*k+k]
		zl := ws.clogits[b*k : b*k+k]
		mx := math.Inf(-1)
		for j := 0; j < k; j++ {
			s := float64(bias[j])
			row := w[j*d : j*d+d]
			for c, p := range pooled {
				s += float64(row[c]) * float64(p)
			}
			z[j] = s
			zl[j] = float32(s)
			mx = math.Max(mx, s)
		}
		if !ws.hasTargets {
			continue
		}
		se := 0.0
		for j := range z {
			se += math.Exp(z[j] - mx)
		}
		lse := mx + math.Log(se)
		ws.seqNLL[b] = lse - z[ws.labels[b]]
		for j := range z {
			z[j] = math.Exp(z[j] - lse) // softmax, for the backward
		}
	}
}

// classifyBack writes the head's gradients and ∂loss/∂lnf-output into
// ws.dh: with g = (softmax − onehot)/ceDiv per sequence, dW = Σ_b g_b
// pooled_bᵀ, db = Σ_b g_b, and every position i < t of sequence b gets
// Wᵀ g_b / t.
func (m *Model) classifyBack(ws *Workspace) {
	d, k, t := m.d, m.classes, ws.t
	w, dw, db := m.headW.Data, m.headW.Grad, m.headB.Grad
	inv := 1 / ws.ceDiv
	for b := 0; b < ws.b; b++ {
		p := ws.cprob[b*k : b*k+k]
		pooled := ws.pooled[b*d : b*d+d]
		dp := ws.dh[b*t*d : b*t*d+d] // ∂loss/∂pooled, then copied to every row
		clear(dp)
		for j := 0; j < k; j++ {
			g := p[j]
			if j == int(ws.labels[b]) {
				g--
			}
			g32 := float32(g * inv)
			db[j] += g32
			row, drow := w[j*d:j*d+d], dw[j*d:j*d+d]
			for c := range pooled {
				drow[c] += g32 * pooled[c]
				dp[c] += g32 * row[c]
			}
		}
		it := float32(1 / float64(t))
		for c := range dp {
			dp[c] *= it
		}
		for i := 1; i < t; i++ {
			copy(ws.dh[(b*t+i)*d:(b*t+i+1)*d], dp)
		}
	}
}

// ClassLogits returns the class logits of sequence b from the last
// ForwardClassify or ClassifyBatch (valid until the next pass; for
// ClassifyBatch, b indexes its sequences in the order given).
func (ws *Workspace) ClassLogits(b int) []float32 {
	k := ws.m.classes
	if k == 0 || !ws.fwdDone || b < 0 || b >= ws.nClass {
		panic("model: ClassLogits: no classifier forward, or sequence out of range of the last one")
	}
	r := int(ws.order[b])
	return ws.outLogits[r*k : r*k+k : r*k+k]
}

// ClassifyBatch runs the classifier on sequences of any lengths 1..N
// (len(seqs) ≤ the workspace's batch), grouped by length as the comment at
// the top of classify.go says. With labels (one per sequence) it returns
// the mean cross-entropy over the sequences and, when backward is set,
// leaves the gradient of that mean in every non-frozen Param.Grad (as
// Backward does); with labels nil it returns 0 and only the logits
// (ws.ClassLogits, in the order of seqs). It returns NaN when interrupted.
func (m *Model) ClassifyBatch(ws *Workspace, seqs [][]int32, labels []int32, backward bool) float64 {
	if m.classes == 0 {
		panic(fmt.Sprintf("model: ClassifyBatch: spec %q is a language model, not a classifier", m.Spec.Name))
	}
	nb := len(seqs)
	if ws == nil || ws.m != m {
		panic("model: ClassifyBatch: the workspace was not made by this model's NewWorkspace")
	}
	if nb < 1 || nb > ws.batch {
		panic(fmt.Sprintf("model: ClassifyBatch: %d sequences, want 1..%d (the workspace's size)", nb, ws.batch))
	}
	if labels != nil && len(labels) != nb {
		panic(fmt.Sprintf("model: ClassifyBatch: %d labels for %d sequences", len(labels), nb))
	}
	if backward && labels == nil {
		panic("model: ClassifyBatch: the backward needs labels")
	}
	for i, s := range seqs {
		if len(s) < 1 || len(s) > m.n {
			panic(fmt.Sprintf("model: ClassifyBatch: sequence %d has %d tokens, want 1..%d", i, len(s), m.n))
		}
	}
	// Group by length: a stable sort of the indices by length.
	idx := ws.cidx[:nb]
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortStableFunc(idx, func(a, b int32) int { return len(seqs[a]) - len(seqs[b]) })
	k := m.classes
	// Sorted by length, the batch is one group when its shortest and
	// longest sequences are of equal length; else the groups' gradients
	// are summed in ws.acc.
	multi := len(seqs[idx[0]]) != len(seqs[idx[nb-1]])
	sum := 0.0
	first := true
	for g0 := 0; g0 < nb; {
		t := len(seqs[idx[g0]])
		g1 := g0 + 1
		for g1 < nb && len(seqs[idx[g1]]) == t {
			g1++
		}
		b := g1 - g0
		in := ws.cin[:b*t]
		var lb []int32
		if labels != nil {
			lb = ws.clab[:b]
		}
		for i := 0; i < b; i++ {
			copy(in[i*t:(i+1)*t], seqs[idx[g0+i]])
			if lb != nil {
				lb[i] = labels[idx[g0+i]]
			}
		}
		loss := m.forwardClassify(ws, in, lb, b)
		if ws.interrupted {
			return math.NaN()
		}
		ws.ceDiv = float64(nb)
		sum += loss * float64(b)
		for i := 0; i < b; i++ {
			ws.order[idx[g0+i]] = int32(g0 + i)
		}
		copy(ws.outLogits[g0*k:g1*k], ws.clogits[:b*k])
		if backward {
			m.Backward(ws)
			if ws.interrupted {
				return math.NaN()
			}
			if multi {
				m.accumulate(ws, first)
			}
		}
		first = false
		g0 = g1
	}
	if backward && multi {
		o := 0
		for _, p := range m.Params {
			o += copy(p.Grad, ws.acc[o:o+len(p.Grad)])
		}
	}
	ws.nClass = nb
	if labels == nil {
		return 0
	}
	return sum / float64(nb)
}

// accumulate adds (or, first, copies) the parameters' gradients into ws.acc.
func (m *Model) accumulate(ws *Workspace, first bool) {
	o := 0
	for _, p := range m.Params {
		dst := ws.acc[o : o+len(p.Grad)]
		if first {
			copy(dst, p.Grad)
		} else {
			for i, g := range p.Grad {
				dst[i] += g
			}
		}
		o += len(p.Grad)
	}
}
