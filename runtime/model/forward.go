package model

import (
	"fmt"
	"math"
	"runtime"

	"github.com/synthgen/synthgen/runtime/mat"
)

// Forward runs the network on batch sequences. inputs and targets hold
// batch·t tokens each, sequence-major (t = len(inputs)/batch, 1 ≤ t ≤ N).
// It returns the mean cross-entropy in nats over the batch·t positions
// (summed in float64), or 0 when targets is nil (the logits are still
// available through ws.Logits); NaN when interrupted (Workspace.SetInterrupt). Misuse (sizes, tokens out of range, a
// workspace of another model) panics.
func (m *Model) Forward(ws *Workspace, inputs, targets []int32, batch int) float64 {
	m.checkForward(ws, inputs, targets, batch)
	if m.classes > 0 {
		panic(fmt.Sprintf("model: Forward: spec %q is a classifier: use ForwardClassify", m.Spec.Name))
	}
	// The pool's workers are stopped by a cleanup when m becomes unreachable;
	// keep m reachable until every job of this pass has finished, or the
	// cleanup could stop them in the middle of one.
	defer runtime.KeepAlive(m)
	ws.hasTargets = targets != nil
	if ws.hasTargets {
		copy(ws.targets, targets)
	}
	if !m.forwardBody(ws, inputs, batch, false) {
		return math.NaN()
	}
	rows := ws.rows
	e := m.eng
	e.Linear(ws.logits, ws.xf, m.tokEmb.Data, nil, rows, m.d, m.vocab)
	ws.fwdDone = true
	if !ws.hasTargets {
		return 0
	}
	m.crossEntropy(ws, false)
	sum := 0.0
	for _, v := range ws.rowNLL[:rows] {
		sum += v
	}
	return sum / float64(rows)
}

// forwardKV runs the blocks on one sequence as Forward does, up to the
// last block's products of h1 that a Decoder's caches hold (v, and k where
// the layer has one; ws.lay[l].v and .k of every block l as Forward leaves
// them, but for linear attention the last block's k is K, not φ(K)), and
// nothing after them (the last block's attention, output projection and
// feed-forward, lnf and the logits): a Decoder's prefill of all but the
// last token (decode.go).
func (m *Model) forwardKV(ws *Workspace, inputs []int32) {
	m.checkForward(ws, inputs, nil, 1)
	defer runtime.KeepAlive(m) // as in Forward
	ws.hasTargets = false
	m.forwardBody(ws, inputs, 1, true)
}

// forwardBody runs the embedding, the blocks and lnf (into ws.xf) on batch
// sequences of len(inputs)/batch tokens, and reports false when the
// workspace's interrupt stopped it. With kvOnly it stops in the last
// block after v and k (forwardKV).
func (m *Model) forwardBody(ws *Workspace, inputs []int32, batch int, kvOnly bool) bool {
	d := m.d
	t := len(inputs) / batch
	rows := batch * t
	ws.b, ws.t, ws.rows = batch, t, rows
	ws.fwdDone, ws.backDone, ws.interrupted = false, false, false
	m.keptBlocks(ws)
	copy(ws.tokens, inputs)
	e := m.eng
	m.embed(ws)
	for l := range m.layers {
		if ws.stopHere() {
			return false
		}
		ly, lw := &m.layers[l], &ws.lay[l]
		x := ws.xs[l][:rows*d]
		m.layerNorm(x, lw.h1, lw.mu1, lw.rs1, ly.ln1w, ly.ln1b, rows)
		// The layers that read h1 (v, q and k, w1), h1 packed once in bf16.
		var outs [4]mat.LinearOut
		n := 0
		kvStop := kvOnly && l == len(m.layers)-1
		for i, h := range m.h1Layers(ws, ly, lw) {
			if h.l != nil && !(kvStop && (i == 1 || i == 3)) { // kvStop: v and k only
				outs[n] = mat.LinearOut{Y: h.y, W: h.l.w.Data, B: h.l.b.Data, N: d}
				n++
			}
		}
		e.LinearShared(lw.h1, rows, d, outs[:n])
		if kvStop {
			return true
		}
		if m.hasG {
			m.elementwise(ewRelu, lw.g, nil, rows*d)
		}
		if ly.fa.w != nil {
			rh := rows * m.heads
			e.Linear(lw.fa, lw.g, ly.fa.w.Data, ly.fa.b.Data, rh, m.dh, m.fa)
			e.Linear(lw.fb, lw.g, ly.fb.w.Data, ly.fb.b.Data, rh, m.dh, m.fb)
		}
		if ly.mix != nil {
			mixWeights(ly.mix.Data, lw.w)
		}
		m.attentionForward(ws, l)
		e.LinearRes(lw.xm, x, lw.y, ly.o.w.Data, ly.o.b.Data, rows, d, d)
		m.layerNorm(lw.xm, lw.h2, lw.mu2, lw.rs2, ly.ln2w, ly.ln2b, rows)
		m.fc1Gelu(lw.gd, lw.gl, lw.h2, ly.fc1.w.Data, ly.fc1.b.Data, rows) // gd: GELU's derivative
		next := ws.xs[l+1]
		e.LinearRes(next, lw.xm, lw.gl, ly.fc2.w.Data, ly.fc2.b.Data, rows, m.ffn, d)
	}
	if ws.stopHere() {
		return false
	}
	m.layerNorm(ws.xs[len(m.layers)], ws.xf, ws.muF, ws.rsF, m.lnfW, m.lnfB, rows)
	return true
}

func (m *Model) checkForward(ws *Workspace, inputs, targets []int32, batch int) {
	m.checkInputs("Forward", ws, inputs, batch)
	if targets != nil && len(targets) != len(inputs) {
		panic(fmt.Sprintf("model: Forward: %d targets for %d inputs", len(targets), len(inputs)))
	}
	for i, v := range targets {
		if v < 0 || int(v) >= m.vocab {
			panic(fmt.Sprintf("model: Forward: targets[%d] = %d is out of the vocabulary [0, %d)", i, v, m.vocab))
		}
	}
}

// checkInputs panics on a misused workspace, batch or inputs of fn.
func (m *Model) checkInputs(fn string, ws *Workspace, inputs []int32, batch int) {
	if ws == nil || ws.m != m {
		panic("model: " + fn + ": the workspace was not made by this model's NewWorkspace")
	}
	if batch < 1 || batch > ws.batch {
		panic(fmt.Sprintf("model: "+fn+": batch %d, want 1 ≤ batch ≤ %d (the workspace's size)", batch, ws.batch))
	}
	if len(inputs)%batch != 0 || len(inputs)/batch < 1 || len(inputs)/batch > m.n {
		panic(fmt.Sprintf("model: "+fn+": %d input tokens do not make %d sequences of 1..%d tokens", len(inputs), batch, m.n))
	}
	for i, v := range inputs {
		if v < 0 || int(v) >= m.vocab {
			panic(fmt.Sprintf("model: "+fn+": inputs[%d] = %d is out of the vocabulary [0, %d)", i, v, m.vocab))
		}
	}
}

// h1Layer is a linear layer that reads h1 (LayerNorm 1's output), with its
// output y and the gradient dy at that output; l is nil for a layer the
// variant does not have.
type h1Layer struct {
	l     *linear
	y, dy []float32
}

// h1Layers lists the linear layers of layer ly (workspace lw of ws) that
// read h1, in the order the forward and backward passes run their
// products: v, then q and k (m.hasQK), then w1 (m.hasG).
func (m *Model) h1Layers(ws *Workspace, ly *layer, lw *layerWS) [4]h1Layer {
	var hs [4]h1Layer
	hs[0] = h1Layer{&ly.v, lw.v, ws.dv}
	if m.hasQK {
		hs[1], hs[2] = h1Layer{&ly.q, lw.q, ws.dq}, h1Layer{&ly.k, lw.k, ws.dk}
	}
	if m.hasG {
		hs[3] = h1Layer{&ly.w1, lw.g, ws.dg}
	}
	return hs
}
