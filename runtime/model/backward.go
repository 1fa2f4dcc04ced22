package model

import (
	"runtime"

	"github.com/synthgen/synthgen/runtime/mat"
)

// Backward computes, after a Forward with targets (or a ForwardClassify
// with labels), d(mean loss)/d(param)
// into every non-frozen Param.Grad (overwriting it). Interrupted
// (Workspace.SetInterrupt), it returns early with the gradients
// incomplete.
func (m *Model) Backward(ws *Workspace) {
	if ws == nil || ws.m != m || !ws.fwdDone || !ws.hasTargets {
		panic("model: Backward needs a Forward with targets on this workspace first")
	}
	// The pool's workers are stopped by a cleanup when m becomes unreachable;
	// keep m reachable until every job of this pass has finished, or the
	// cleanup could stop them in the middle of one.
	defer runtime.KeepAlive(m)
	ws.backDone, ws.interrupted = true, false // the attention blocks become gradients
	if ws.stopHere() {
		return
	}
	m.zeroGrads(ws)
	d, rows, heads := m.d, ws.rows, m.heads
	e := m.eng

	// Output: tied embedding (a classifier's head and pooling), then lnf.
	if m.classes > 0 {
		m.classifyBack(ws)
	} else {
		m.crossEntropy(ws, true)
		e.LinearBackX(ws.dh, ws.dlogits, m.tokEmb.Data, rows, d, m.vocab, false)
		e.LinearBackW(m.tokEmb.Grad, nil, ws.dlogits, ws.xf, rows, d, m.vocab)
	}
	m.layerNormBack(ws.dh, ws.xs[len(m.layers)], ws.muF, ws.rsF, ws.dx, m.lnfW, m.lnfB, rows, false)

	for l := len(m.layers) - 1; l >= 0; l-- {
		if ws.stopHere() {
			return
		}
		ly, lw := &m.layers[l], &ws.lay[l]
		// Feed-forward: ws.dx is ∂loss/∂xs[l+1].
		m.fc2BackGelu(ws.dgl, lw.gd, ws.dx, ly.fc2.w.Data, rows)
		e.LinearBackW(ly.fc2.w.Grad, ly.fc2.b.Grad, ws.dx, lw.gl, rows, m.ffn, d)
		e.LinearBackX(ws.dh, ws.dgl, ly.fc1.w.Data, rows, d, m.ffn, false)
		e.LinearBackW(ly.fc1.w.Grad, ly.fc1.b.Grad, ws.dgl, lw.h2, rows, d, m.ffn)
		m.layerNormBack(ws.dh, lw.xm, lw.mu2, lw.rs2, ws.dx, ly.ln2w, ly.ln2b, rows, true)

		// Attention: ws.dx is ∂loss/∂xm.
		e.LinearBackX(ws.dy, ws.dx, ly.o.w.Data, rows, d, d, false)
		e.LinearBackW(ly.o.w.Grad, ly.o.b.Grad, ws.dx, lw.y, rows, d, d)
		m.attentionBackward(ws, l)
		if ly.fa.w != nil {
			rh := rows * heads
			dense := ly.w2.w != nil // dense's kernel already wrote ws.dg
			e.LinearBackX(ws.dg, ws.dfa, ly.fa.w.Data, rh, m.dh, m.fa, dense)
			e.LinearBackW(ly.fa.w.Grad, ly.fa.b.Grad, ws.dfa, lw.g, rh, m.dh, m.fa)
			e.LinearBackX(ws.dg, ws.dfb, ly.fb.w.Data, rh, m.dh, m.fb, true)
			e.LinearBackW(ly.fb.w.Grad, ly.fb.b.Grad, ws.dfb, lw.g, rh, m.dh, m.fb)
		}
		if m.hasG {
			m.elementwise(ewReluBack, ws.dg, lw.g, rows*d)
		}
		// The layers that read h1 (v, q and k, w1): dh = Σ dyᵢ·wᵢ, and
		// every weight's gradient, h1 packed once in bf16.
		var terms [4]mat.BackXTerm
		var grads [4]mat.GradOut
		n := 0
		for _, h := range m.h1Layers(ws, ly, lw) {
			if h.l != nil {
				terms[n] = mat.BackXTerm{DY: h.dy, W: h.l.w.Data, N: d}
				grads[n] = mat.GradOut{DW: h.l.w.Grad, DB: h.l.b.Grad, DY: h.dy, N: d}
				n++
			}
		}
		e.LinearBackXSum(ws.dh, rows, d, terms[:n], false)
		e.LinearBackWShared(lw.h1, rows, d, grads[:n])
		m.layerNormBack(ws.dh, ws.xs[l], lw.mu1, lw.rs1, ws.dx, ly.ln1w, ly.ln1b, rows, true)
	}
	m.embedBack(ws)
}
