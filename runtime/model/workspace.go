package model

import (
	"github.com/synthgen/synthgen/runtime/mat"
)

// Workspace holds every buffer of a forward and a backward pass for up to a
// fixed number of sequences of up to N tokens, allocated once (64-byte
// aligned). A Workspace belongs to the Model that made it; it must not be
// used by two goroutines at once.
type Workspace struct {
	m     *Model
	batch int // capacity in sequences

	// The last Forward.
	b, t, rows int // sequences, tokens per sequence, rows = b·t
	tokens     []int32
	targets    []int32
	hasTargets bool
	fwdDone    bool
	backDone   bool // a Backward has run since: the attention blocks hold dB
	// sharedP: the last Forward ran the attention on the shared bf16
	// path, which keeps no probabilities (attention_bf16.go).
	sharedP bool
	// stripsP: the last Forward ran vanilla's or dense's attention (alone
	// or mixed with random) on the bf16 path, a strip of rows at a time
	// (strips_bf16.go).
	stripsP bool

	interrupt   func() bool // SetInterrupt's: checked between layers
	interrupted bool        // the last pass returned early

	xs     [][]float32 // residual stream: xs[l] enters layer l, xs[L] leaves the last one
	lay    []layerWS
	muF    []float32
	rsF    []float32
	xf     []float32 // lnf output [rows, d]
	logits []float32 // [rows, vocab]
	lse    []float32 // per row: log Σ exp(logits), for the backward's kernel
	ceMax  []float32 // per row: max of the logits (SoftmaxStats)
	ceSum  []float32 // per row: Σ exp(logits − max) (SoftmaxStats)
	rowNLL []float64 // per row: cross-entropy

	// A classifier's head (classify.go).
	labels    []int32   // [batch]: the last ForwardClassify's labels
	pooled    []float32 // [batch, d]: mean of lnf's output over the sequence
	cprob     []float64 // [batch, classes]: the logits, then (with labels) their softmax
	clogits   []float32 // [batch, classes]: the logits as float32 (ClassLogits)
	seqNLL    []float64 // [batch]: cross-entropy per sequence
	ceDiv     float64   // the backward divides the head's gradient by it: the batch's size
	acc       []float32 // ClassifyBatch's gradient sum over length groups (all parameters)
	cin       []int32   // [batch, N]: ClassifyBatch's tokens of one length group
	clab      []int32   // [batch]: its labels
	cidx      []int32   // [batch]: the sequences sorted by length
	order     []int32   // [batch]: sequence → its row of outLogits
	outLogits []float32 // [batch, classes]: the logits ClassLogits returns
	nClass    int       // sequences of the last classifier pass (0: none)

	// Backward buffers, shared by the layers.
	dlogits []float32 // [rows, vocab]
	dx      []float32 // gradient of the residual stream
	dh      []float32 // gradient of a LayerNorm's output
	dy      []float32 // gradient of the attention's head outputs
	dq, dk  []float32
	dv      []float32
	dg      []float32 // gradient of relu(w1·h), then of w1·h
	dfa     []float32 // [rows·heads, a]
	dfb     []float32 // [rows·heads, b]
	dgl     []float32 // [rows, ffn]: gradient of the GELU output, then of fc1's output

	// Per (sequence, head) task partial gradients of the shared parameters,
	// reduced in task order.
	pW2  []float32 // [tasks][N·dh + N]: w2 weight, then bias
	pR1  []float32 // [tasks][N·k]
	pR2  []float32 // [tasks][N·k]
	pMix []float32 // [tasks][components]
	pW   []float32 // [tasks][N·N]: aft_local's w
	// aft_full's products (aftfull.go): κ per sequence and channel [batch, d];
	// D and G [N, batch·2d]; dEw of one row block [aftBlock, N].
	aKappa, aD, aG, aDEw []float32
	aX                   mat.Panels   // X packed once per layer for its row blocks' products
	aTerms               []mat.TNTerm // G's products, one per row block
	aTiny                []bool       // [layers, batch]: the layer's sequence has directly computed (i, c)
	pU                   []float32    // [tasks][window]: aft_conv's u
	dmixW                []float64    // [components]
}

// layerWS is what the forward keeps of one layer for the backward.
type layerWS struct {
	mu1, rs1, mu2, rs2 []float32 // LayerNorm statistics per row
	h1                 []float32 // ln1 output [rows, d]
	q, k, v            []float32 // projections [rows, d]
	g                  []float32 // relu(w1·h1) [rows, d]
	fa, fb             []float32 // [rows·heads, a], [rows·heads, b]
	a                  []float32 // [batch][heads][N, N] attention probabilities (dB after the backward)
	y                  []float32 // attention heads' outputs [rows, d]
	xm                 []float32 // residual after the attention [rows, d]
	h2                 []float32 // ln2 output [rows, d]
	gd                 []float32 // gelu'(fc1 output) [rows, ffn]
	gl                 []float32 // gelu(fc1 output) [rows, ffn]
	w                  []float32 // softmax(mix)
	z, ms, rd          []float32 // aft: Z and the kernels' m, rd [rows, d]; linear: rd [rows, heads]
	ew                 []float32 // aft_full: exp(w − rowmax) in row blocks (aftBlockOf)
	x, nd              []float32 // aft_full: [Ek ⊙ V | Ek] and [num | den], [N, batch·2d]
}

// keepsProbs reports whether the attention uses the [N, N] block A a
// (sequence, head) per layer (Workspace's lay[l].a): the float32 kernels
// keep the probabilities there from the forward to the backward, and so
// does the strip path below recomputeN, or leaves dB there in a mixture.
// The shared path and a single component's strip path from recomputeN
// make the probabilities again instead, and their workspaces have no A
// (N 2048, batch 2: 128 MiB a layer).
func (m *Model) keepsProbs() bool {
	if m.kind != kindSynth || m.bfAttention() {
		return false
	}
	return !(m.bfStrips() && m.stripsRecompute() && len(m.comps) == 1)
}

// keptBlocks gives ws the blocks A when the attention now keeps them but
// ws was built while it did not (a bf16 kernel set then, or recomputeN
// since changed): once, on the first forward that needs them.
func (m *Model) keptBlocks(ws *Workspace) {
	if !m.keepsProbs() || len(ws.lay) == 0 || ws.lay[0].a != nil {
		return
	}
	for l := range ws.lay {
		ws.lay[l].a = mat.Alloc(m.keptLen(ws.batch))
	}
}

// keptLen is the length of a layer's block A for batch sequences: an
// N×N matrix a (sequence, head).
func (m *Model) keptLen(batch int) int { return batch * m.heads * m.n * m.n }

// NewWorkspace allocates the buffers for up to batch sequences of up to
// spec.N tokens. WorkspaceBytes is its size.
func (m *Model) NewWorkspace(batch int) *Workspace {
	return m.buildWorkspace(batch, &wsAlloc{})
}

// buildWorkspace makes the workspace of batch sequences with a's
// allocations: the buffers, or (a counting) only their sizes. It is the one
// place that sizes a workspace, for NewWorkspace and WorkspaceBytes alike.
func (m *Model) buildWorkspace(batch int, a *wsAlloc) *Workspace {
	if batch < 1 {
		batch = 1
	}
	n, d, h := m.n, m.d, m.heads
	rows := batch * n
	tasks := batch * h
	ws := &Workspace{m: m, batch: batch}
	ws.tokens = a.i32(rows)
	ws.targets = a.i32(rows)
	ws.xs = a.slices(len(m.layers) + 1)
	for i := range ws.xs {
		ws.xs[i] = a.f32(rows * d)
	}
	ws.lay = a.layers(len(m.layers))
	for l := range ws.lay {
		lw := &ws.lay[l]
		lw.mu1, lw.rs1 = a.f32(rows), a.f32(rows)
		lw.mu2, lw.rs2 = a.f32(rows), a.f32(rows)
		lw.h1 = a.f32(rows * d)
		if m.hasQK {
			lw.q, lw.k = a.f32(rows*d), a.f32(rows*d)
		}
		lw.v = a.f32(rows * d)
		if m.hasG {
			lw.g = a.f32(rows * d)
		}
		if m.Spec.Has("factorized_dense") {
			lw.fa = a.f32(rows * h * m.fa)
			lw.fb = a.f32(rows * h * m.fb)
		}
		if m.keepsProbs() {
			lw.a = a.f32(m.keptLen(batch))
		}
		switch m.kind {
		case kindLinear:
			lw.rd = a.f32(rows * h)
		case kindAFTFull:
			lw.z = a.f32(rows * d)
			if m.aftKernels {
				lw.ms, lw.rd = a.f32(rows*d), a.f32(rows*d)
				break
			}
			lw.ew = a.f32(aftEwSize(n, m.Spec.Bidirectional))
			lw.x, lw.nd = a.f32(rows*2*d), a.f32(rows*2*d)
		case kindAFTLocal, kindAFTSimple, kindAFTConv:
			lw.z, lw.ms, lw.rd = a.f32(rows*d), a.f32(rows*d), a.f32(rows*d)
		}
		lw.y = a.f32(rows * d)
		lw.xm = a.f32(rows * d)
		lw.h2 = a.f32(rows * d)
		lw.gd = a.f32(rows * m.ffn)
		lw.gl = a.f32(rows * m.ffn)
		lw.w = a.f32plain(len(m.comps))
	}
	ws.muF, ws.rsF = a.f32(rows), a.f32(rows)
	ws.xf = a.f32(rows * d)
	if m.classes == 0 {
		ws.logits = a.f32(rows * m.vocab)
		ws.lse, ws.ceMax, ws.ceSum = a.f32(rows), a.f32(rows), a.f32(rows)
		ws.rowNLL = a.f64(rows)
		ws.dlogits = a.f32(rows * m.vocab)
	} else {
		ws.labels = a.i32(batch)
		ws.pooled = a.f32(batch * d)
		ws.cprob = a.f64(batch * m.classes)
		ws.clogits = a.f32(batch * m.classes)
		ws.seqNLL = a.f64(batch)
		np := 0
		for _, p := range m.Params {
			np += len(p.Grad)
		}
		ws.acc = a.f32(np)
		ws.cin = a.i32(rows)
		ws.clab, ws.cidx, ws.order = a.i32(batch), a.i32(batch), a.i32(batch)
		ws.outLogits = a.f32(batch * m.classes)
	}
	ws.dx = a.f32(rows * d)
	ws.dh = a.f32(rows * d)
	ws.dy = a.f32(rows * d)
	ws.dv = a.f32(rows * d)
	if m.hasQK {
		ws.dq, ws.dk = a.f32(rows*d), a.f32(rows*d)
	}
	if m.hasG {
		ws.dg = a.f32(rows * d)
	}
	if m.Spec.Has("factorized_dense") {
		ws.dfa = a.f32(rows * h * m.fa)
		ws.dfb = a.f32(rows * h * m.fb)
	}
	ws.dgl = a.f32(rows * m.ffn)
	if m.Spec.Has("dense") {
		ws.pW2 = a.f32(tasks * (n*m.dh + n))
	}
	if m.Spec.Has("factorized_random") {
		ws.pR1 = a.f32(tasks * n * m.fk)
		ws.pR2 = a.f32(tasks * n * m.fk)
	}
	ws.pMix = a.f32plain(tasks * len(m.comps))
	switch m.kind {
	case kindAFTFull:
		if m.aftKernels {
			ws.pW = a.f32(tasks * n * n)
			break
		}
		ws.aKappa = a.f32(batch * d)
		ws.aTiny = a.bools(len(m.layers) * batch)
		ws.aD, ws.aG = a.f32(rows*2*d), a.f32(rows*2*d)
		ws.aDEw = a.f32(min(n, aftBlock) * n)
		ws.aTerms = a.terms((n + aftBlock - 1) / aftBlock)
		// ws.aX: the engine packs X [n, batch·2d] on first use, as B of
		// the forward's products (nx × t), then transposed as B of the
		// backward's (t × nx); the buffer is allocated again when the
		// second is larger (none without a micro-kernel, whose plain-Go
		// products read X in place).
		nx := batch * 2 * d
		fwd, back := m.eng.PanelFloats(nx, n), m.eng.PanelFloats(n, nx)
		if fwd > 0 {
			a.lazy(fwd)
		}
		if back > fwd {
			a.lazy(back)
		}
	case kindAFTLocal:
		ws.pW = a.f32(tasks * n * n)
	case kindAFTConv:
		ws.pU = a.f32(tasks * m.uWidth())
	}
	ws.dmixW = a.f64(len(m.comps))

	// The matrix engine's scratch for the largest linear layer.
	s := 0
	vocabOut := m.vocab
	if m.classes > 0 {
		vocabOut = d // a classifier has no vocab logits
	}
	for _, sh := range [][2]int{{d, d}, {d, m.ffn}, {m.ffn, d}, {d, vocabOut}} {
		s = max(s, mat.ScratchSize(rows, sh[0], sh[1]))
	}
	if m.Spec.Has("factorized_dense") {
		s = max(s, mat.ScratchSize(rows*h, m.dh, max(m.fa, m.fb)))
	}
	if m.kind == kindAFTFull {
		s = max(s, mat.ScratchSize(min(n, aftBlock), batch*2*d, n))
	}
	a.scratch(m.eng, s)
	return ws
}

// Logits returns the vocab logits at position i of sequence b from the last
// Forward (valid until the next Forward).
func (ws *Workspace) Logits(b, i int) []float32 {
	if ws.m.classes > 0 {
		panic("model: Logits: the model is a classifier (ClassLogits)")
	}
	if !ws.fwdDone || b < 0 || b >= ws.b || i < 0 || i >= ws.t {
		panic("model: Logits: position out of range of the last Forward")
	}
	v := ws.m.vocab
	r := b*ws.t + i
	return ws.logits[r*v : r*v+v : r*v+v]
}
