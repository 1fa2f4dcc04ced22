package model

import (
	"fmt"
	"math"
	"sync"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/mat"
)

// Incremental decoding.
//
// A Decoder holds, per layer, what the attention of the next position needs
// from the positions before it, so that the logits at position i cost one
// position's linear layers plus the attention over the cached positions,
// instead of a Forward over all i+1 of them. Every row of the network but
// the attention's depends on its own position alone (the embedding with
// pos_emb[i], the LayerNorms, the projections, the feed-forward, lnf and
// the output), and the causal attention's row i reads the rows j ≤ i only,
// so row i of the decoder equals row i of Forward on the same tokens: the
// formulas are the card's, computed in a different order, to float32
// rounding (decode_test.go checks every variant and mixture at every
// position). What each variant caches, and why its row i is the card's:
//
//   - vanilla: K and V of every position. B_ij = Q_i·K_j/√dh needs Q_i
//     (the new row's) and the cached K_j; the softmax over j ≤ i weights
//     the cached V_j. K is kept transposed per head and V per head, so
//     that the scores and the weighted sum are each one product on the
//     matrix engine.
//   - dense: V only. Its logits B_i = w2(relu(w1(h_i))_h)[:i+1] are a
//     function of x_i alone (one [Heads, DH]×[DH, i+1] product against w2).
//   - random, fixed_random: V only. Row i of B is R[h, i, :i+1], fixed once
//     trained: no input enters it.
//   - factorized_random: V only. B_ij = R1[h, i]·R2[h, j], parameters alone.
//   - factorized_dense: V only. B_ij = FA_i[j div b]·FB_i[j mod b] with FA_i
//     and FB_i from G_i = relu(w1(h_i)): x_i alone.
//   - mixtures: what their components cache (V, and K with vanilla); row i
//     is Σ_m w_m·B_i^(m), w = softmax(mix) taken once per Decoder.
//   - aft_full: per position the factors [exp(K_j − κ) ⊙ V_j | exp(K_j − κ)],
//     κ the running maximum of the keys per channel; row i is the product
//     of exp(w[i, :i+1] − max) with them, numerator and denominator at
//     once, as Forward's factorised aft_full (aftfull.go) computes it, with
//     the same direct fallback where a denominator underflows (which reads
//     K and V, also cached).
//   - aft_local, aft_conv: K and V of every position, of which only the last
//     window are read: the keys j ≤ i − window have bias 0 (not −∞), so
//     they enter every later row with the same weights exp(K_j) and are
//     kept as running sums per channel, Σ exp(K_j − M)·V_j and
//     Σ exp(K_j − M), with M their running maximum (a key above M rescales
//     both sums by exp(M − K_j), as the kernels' online softmax does). Row
//     i joins those sums, rescaled to the row's maximum, with the window's
//     keys under their biases w[i, j] (aft_local) or u[h, i − j] (aft_conv).
//   - aft_simple: only those running sums (every key has bias 0), d floats
//     thrice per layer, whatever the length.
//   - linear: per head the running S = Σ φ(K_j)V_jᵀ (DH×DH) and
//     z = Σ φ(K_j); row i is φ(Q_i)ᵀS_i / (φ(Q_i)·z_i + 1e-6), exactly the
//     kernel's recurrence ("Transformers are RNNs").
//
// Prefill: Prefill runs the tokens as one batched Forward (the spec's
// kernels, on the model's workers) and copies K, V of every layer out of
// the forward's workspace (for linear attention the workspace holds φ(K)
// in place of K), from which the running sums above are formed in
// position order, as the steps would have formed them.
//
// Steps run on the decoder's own matrix engine. A decoder's own step (one
// row) runs its linear layers (D→D, D→FFN, FFN→D, D→Vocab) on the spec's
// one-row kernels (kernels.GemvFunc), which stream each weight once, packed
// for them: on the GEMM micro-kernel one row costs what MR rows cost (it
// computes whole tiles), and these products were most of a step. A
// DecodeBatch, which steps several decoders of one model (Siblings,
// sharing the packed weights) at once, runs its rows padded to the
// micro-kernel's MR rows, and gets up to MR rows' linear layers for the
// price of one. The one-row kernel forms every sum in the micro-kernel's
// order (runtime/kernels' GemvFunc), so each decoder's logits in a batch
// are bit for bit those of its own step (TestDecodeBatch). The one-row
// kernels are used only beside the micro-kernel, at an assembly level
// (where both use fused multiply-adds); otherwise every step runs on the
// engine's products, padded as a batch's.
//
// Beyond n tokens: positions are absolute (pos_emb has n rows), so the
// window cannot slide. When the window is full (n tokens) and another
// token comes, Next re-encodes the last max(1, n/2) tokens, the new one
// included, with one Prefill and continues incrementally from there: the
// token at position p of a long text is then predicted from the last c
// tokens, where c cycles through n/2 … n (never fewer than n/2, or the
// whole text when it is shorter), and the logits are exactly those of
// Forward on those c tokens. The cost of a re-encode, one Forward at n/2,
// is spread over the n/2 tokens that follow it. Forward on the last n
// tokens for every token (the old sampler, kept in runtime/synth as the
// tests' oracle) sees c = n always, at the cost of a full Forward per token.

// Decoder is the incremental state of one sequence on a Model (see the
// comment above for what it caches). Make one with NewDecoder; it is not
// safe for concurrent use, but any number of Decoders of one Model may
// step concurrently: a step reads the parameters and runs on its own
// goroutine (one core), without the model's workers. Prefill runs a
// Forward on the model's workers under a lock the model's Decoders share;
// it must not run while the caller runs Forward or Backward on the same
// Model. A Decoder reads the parameters as they are when it is made (the
// linear layers' weights are packed for the one-row products): after
// changing them, make a new Decoder.
type Decoder struct {
	m    *Model
	eng  *mat.Engine
	mk   bool        // eng has the GEMM micro-kernel
	mr   int         // its tile's rows (MR)
	pa   []float32   // a product's A padded to MR rows (see mulPanels)
	pc   []float32   // its C
	w    *decWeights // the packed weights (shared with Sibling decoders)
	lay  []decLayer
	toks []int32 // the window's tokens, positions 0 … pos−1
	pos  int

	run    decRunner   // its own steps: one row (padded to MR)
	one    [1]*Decoder // run's batch of one
	tok1   [1]int32
	logits []float32 // the logits of the last position

	// The attention's scratch.
	z            []float32 // aft's Z [D]
	dl           []float32 // dense's logits [Heads, i+1]
	bl, acc      []float32 // one head's component logits [N], their sum [max(N, 2D)]
	mx, den, num []float32 // aft per channel [D]
}

// decLin is a linear layer packed for the decoder's one-row products.
type decLin struct {
	pn      mat.Panels
	b       []float32
	in, out int
	// The one-row kernel of the layer's shape and the weight packed for
	// it (kernels.GemvPack); nil without one.
	gemv kernels.GemvFunc
	gw   []float32
}

type decLayer struct {
	w *decLayerW // the layer's weights
	// Cached K and V. The aft variants (aft_full/local/conv): K and V
	// [N, D]. The synthesizer family: V [Heads][N, DH] (one contiguous
	// [t, DH] matrix per head for the weighted sum's product) and, with
	// vanilla, Kᵀ [Heads][DH, N] (the scores Q_h·K_hᵀ as one product).
	kc, vc []float32
	// aft_local, aft_conv, aft_simple: running sums over the keys out of
	// the window, per channel: maximum, Σ exp(K−M), Σ exp(K−M)·V; n0 the
	// keys they hold (positions 0 … n0−1).
	am, aden, anum []float32
	n0             int
	// linear: S [Heads][DH·DH] and z [Heads][DH].
	ls, lz []float32
	// aft_full: the factors X_j = [exp(K_j − κ) ⊙ V_j | exp(K_j − κ)]
	// [N, 2D] of the cached positions, κ per channel the largest key so
	// far.
	ax, kappa []float32
}

// prefillShared is the workspace the Decoders of a Model prefill on, one
// at a time.
type prefillShared struct {
	mu sync.Mutex
	ws *Workspace
}

// decWeights is a Decoder's snapshot of the parameters its products read,
// packed for them (and the mixture weights); Decoders made by Sibling
// share it, read only.
type decWeights struct {
	out mat.Panels // tok_emb, the tied output projection
	lay []decLayerW
	// gemv: the one-row kernels run a decoder's own steps (see the
	// comment above); outG is tok_emb packed for outGemv.
	gemv    bool
	outGemv kernels.GemvFunc
	outG    []float32
}

type decLayerW struct {
	q, k, v, o, w1, fa, fb, fc1, fc2 *decLin
	w2                               mat.Panels // dense's w2 [N, DH]
	mix                              []float32  // softmax(mix)
}

// NewDecoder returns an empty Decoder (no tokens yet) on m, with its own
// matrix engine on the calling goroutine and its own snapshot of the
// parameters. Only a language model decodes: on a classifier (every
// bidirectional spec is one; its positions see the later ones, so there
// is nothing to decode byte by byte, and it has no next-byte logits)
// NewDecoder panics.
func (m *Model) NewDecoder() *Decoder {
	if m.classes > 0 || m.Spec.Bidirectional {
		panic(fmt.Sprintf("model: NewDecoder: spec %q is a classifier (causal %t), not a language model: it has nothing to decode", m.Spec.Name, m.Spec.Causal()))
	}
	eng, mk := m.decodeEngine()
	d, n := m.d, m.n
	w := &decWeights{lay: make([]decLayerW, len(m.layers)), gemv: m.hasGemv(mk)}
	pack := func(l linear, gemv bool) *decLin {
		if l.w == nil {
			return nil
		}
		p := &decLin{b: l.b.Data, in: l.in, out: l.out}
		eng.PackB(&p.pn, l.w.Data, l.out, l.in, true)
		if w.gemv && gemv {
			p.gemv, p.gw = m.gemvPack(l.w.Data, l.out, l.in)
		}
		return p
	}
	eng.PackB(&w.out, m.tokEmb.Data, m.vocab, d, true)
	if w.gemv {
		w.outGemv, w.outG = m.gemvPack(m.tokEmb.Data, m.vocab, d)
	}
	for l := range m.layers {
		ly, lw := &m.layers[l], &w.lay[l]
		lw.q, lw.k, lw.v, lw.o = pack(ly.q, true), pack(ly.k, true), pack(ly.v, true), pack(ly.o, true)
		// fa and fb run on the rows of G per head (Heads rows a step).
		lw.w1, lw.fa, lw.fb = pack(ly.w1, true), pack(ly.fa, false), pack(ly.fb, false)
		lw.fc1, lw.fc2 = pack(ly.fc1, true), pack(ly.fc2, true)
		if ly.w2.w != nil {
			eng.PackB(&lw.w2, ly.w2.w.Data, n, m.dh, true)
		}
		lw.mix = make([]float32, len(m.comps))
		if ly.mix != nil {
			mixWeights(ly.mix.Data, lw.mix)
		}
	}
	return m.newDecoder(w, eng, mk)
}

// Sibling returns a new, empty Decoder of the same model that shares dc's
// snapshot of the parameters (its packed weights, read only by both), so
// that a pool of Decoders holds the weights once. Each has its own caches
// and engine; they may step concurrently.
func (dc *Decoder) Sibling() *Decoder {
	eng, mk := dc.m.decodeEngine()
	return dc.m.newDecoder(dc.w, eng, mk)
}

// decodeEngine is a matrix engine for one decoder, on the calling
// goroutine, with the spec's GEMM micro-kernel when it has one (mk).
func (m *Model) decodeEngine() (eng *mat.Engine, mk bool) {
	eng = mat.NewEngine(nil)
	if m.Kernels.Chosen["GemmTile"] > kernels.Go {
		eng.SetGemm(m.Kernels.GemmTile, m.Kernels.GemmShape)
		mk = true
	}
	return eng, mk
}

// hasGemv reports whether the decoder's own steps run on the one-row
// kernels: the spec has them all at an assembly level, beside the
// micro-kernel (mk), whose sums they reproduce bit for bit.
func (m *Model) hasGemv(mk bool) bool {
	if !mk {
		return false
	}
	for _, f := range []string{"GemvDD", "GemvDF", "GemvFD", "GemvDV"} {
		if m.Kernels.Chosen[f] <= kernels.Go {
			return false
		}
	}
	return true
}

// gemvPack returns the one-row kernel for a weight w [n, k] (out × in) and
// w packed for it.
func (m *Model) gemvPack(w []float32, n, k int) (kernels.GemvFunc, []float32) {
	var f kernels.GemvFunc
	ks := m.Kernels
	switch d := m.d; {
	case k == d && n == d:
		f = ks.GemvDD
	case k == d && n == m.ffn:
		f = ks.GemvDF
	case k == m.ffn && n == d:
		f = ks.GemvFD
	case k == d && n == m.vocab:
		f = ks.GemvDV
	default:
		panic(fmt.Sprintf("model: no one-row kernel for a %d → %d layer", k, n))
	}
	g := mat.Alloc(n * k)
	kernels.GemvPack(g, w[:n*k], n, k)
	return f, g
}

// padBuffers sizes the decoder's padded product buffers: rows up to
// Heads (fa, fb, dense's w2) rounded up to MR, by the widest operand.
func (dc *Decoder) padBuffers() {
	m := dc.m
	dc.mr = 1
	if dc.mk {
		dc.mr, _ = m.Kernels.GemmShape()
	}
	rows := (max(m.heads, 1) + dc.mr - 1) / dc.mr * dc.mr
	wide := max(m.d, m.ffn, m.n, 2*m.d, m.vocab, m.fa, m.fb)
	dc.pa, dc.pc = mat.Alloc(rows*wide), mat.Alloc(rows*wide)
}

// newDecoder allocates a Decoder's caches and scratch.
func (m *Model) newDecoder(w *decWeights, eng *mat.Engine, mk bool) *Decoder {
	d, n := m.d, m.n
	dc := &Decoder{m: m, eng: eng, mk: mk, w: w, lay: make([]decLayer, len(m.layers))}
	dc.padBuffers()
	for l := range m.layers {
		dl := &dc.lay[l]
		dl.w = &w.lay[l]
		if m.Spec.Has("vanilla") || m.kind == kindAFTFull || m.kind == kindAFTLocal || m.kind == kindAFTConv {
			dl.kc = mat.Alloc(n * d)
		}
		if m.kind != kindAFTSimple && m.kind != kindLinear {
			dl.vc = mat.Alloc(n * d)
		}
		switch m.kind {
		case kindAFTLocal, kindAFTConv, kindAFTSimple:
			dl.am, dl.aden, dl.anum = mat.Alloc(d), mat.Alloc(d), mat.Alloc(d)
		case kindLinear:
			dl.ls, dl.lz = mat.Alloc(d*m.dh), mat.Alloc(d)
		case kindAFTFull:
			dl.ax, dl.kappa = mat.Alloc(n*2*d), mat.Alloc(d)
		}
	}
	row := func() []float32 { return mat.Alloc(d) }
	dc.z, dc.mx, dc.den, dc.num = row(), row(), row(), row()
	dc.run = decRunner{m: m, w: w, eng: eng, mr: dc.mr, rows: m.newDecRows(1, dc.mr)}
	dc.logits = mat.Alloc(m.vocab)
	dc.dl = mat.Alloc(m.heads * n)
	dc.bl, dc.acc = mat.Alloc(n), mat.Alloc(max(n, 2*d))
	dc.toks = make([]int32, n)
	dc.Reset()
	return dc
}

// Model is the model the decoder runs.
func (dc *Decoder) Model() *Model { return dc.m }

// Len is the number of tokens in the decoder's window (the position the
// next token takes, before a re-encode).
func (dc *Decoder) Len() int { return dc.pos }

// Reset empties the decoder (no tokens).
func (dc *Decoder) Reset() {
	dc.pos = 0
	for l := range dc.lay {
		dl := &dc.lay[l]
		dl.n0 = 0
		if dl.am != nil {
			for c := range dl.am {
				dl.am[c] = float32(math.Inf(-1))
			}
			clear(dl.aden)
			clear(dl.anum)
		}
		clear(dl.ls)
		clear(dl.lz)
	}
}

// Prefill empties the decoder, then encodes the last min(len(tokens), N)
// tokens at positions 0, 1, … with one batched Forward, and returns the
// logits at the last of them (vocab floats, valid until the decoder's
// next call). Misuse (no tokens, a token outside the vocabulary) panics.
func (dc *Decoder) Prefill(tokens []int32) []float32 {
	m := dc.m
	if len(tokens) == 0 {
		panic("model: Decoder.Prefill: no tokens")
	}
	tokens = tokens[max(0, len(tokens)-m.n):]
	for i, v := range tokens {
		if v < 0 || int(v) >= m.vocab {
			panic(fmt.Sprintf("model: Decoder.Prefill: tokens[%d] = %d is out of the vocabulary [0, %d)", i, v, m.vocab))
		}
	}
	copy(dc.toks, tokens) // tokens may alias dc.toks (Next's re-encode): copy handles overlap
	t := len(tokens)
	dc.Reset()
	dc.pos = t
	sh := &m.prefill
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.ws == nil {
		sh.ws = m.NewWorkspace(1)
	}
	ws := sh.ws
	m.Forward(ws, dc.toks[:t], nil, 1)
	d := m.d
	for l := range dc.lay {
		dl, lw := &dc.lay[l], &ws.lay[l]
		if dl.kc != nil {
			dc.putK(dl, lw.k[:t*d], 0, t)
		}
		if dl.vc != nil {
			dc.putV(dl, lw.v[:t*d], 0, t)
		}
		switch m.kind {
		case kindAFTSimple, kindAFTLocal, kindAFTConv:
			for j := 0; j < t-dc.win(); j++ {
				dc.aftAdd(dl, lw.k[j*d:j*d+d], lw.v[j*d:j*d+d])
			}
		case kindLinear: // lw.k holds φ(K)
			for j := 0; j < t; j++ {
				dc.linAdd(dl, lw.k[j*d:j*d+d], lw.v[j*d:j*d+d])
			}
		case kindAFTFull:
			copy(dl.kappa, lw.k[:d])
			for j := 1; j < t; j++ {
				for c, x := range lw.k[j*d : j*d+d] {
					dl.kappa[c] = max(dl.kappa[c], x)
				}
			}
			for j := 0; j < t; j++ {
				x := dl.ax[j*2*d : (j+1)*2*d]
				m.Kernels.AFTFactors(d, lw.k[j*d:j*d+d], dl.kappa, lw.v[j*d:j*d+d], x[:d], x[d:])
			}
		}
	}
	copy(dc.logits, ws.Logits(0, t-1))
	return dc.logits
}

// Next appends tok to the window and returns the logits at its position
// (vocab floats, valid until the decoder's next call), which predict the
// token after it. On a full window (N tokens) it first re-encodes the last
// max(1, N/2) − 1 tokens and tok with Prefill (the policy in the comment
// above). A token outside the vocabulary panics.
func (dc *Decoder) Next(tok int32) []float32 {
	m := dc.m
	if tok < 0 || int(tok) >= m.vocab {
		panic(fmt.Sprintf("model: Decoder.Next: token %d is out of the vocabulary [0, %d)", tok, m.vocab))
	}
	if dc.pos == m.n {
		keep := max(1, m.n/2)
		copy(dc.toks, dc.toks[m.n-keep+1:m.n])
		dc.toks[keep-1] = tok
		return dc.Prefill(dc.toks[:keep])
	}
	return dc.step(tok)
}

// win is the number of the last keys aft_local and aft_conv read under a
// bias (the others are in the running sums); 0 for aft_simple.
func (dc *Decoder) win() int {
	if dc.m.kind == kindAFTSimple {
		return 0
	}
	return dc.m.window
}

// putK stores the keys of positions i0 … i0+rows−1 (rows rows of k,
// [rows, D]) in dl's cache.
func (dc *Decoder) putK(dl *decLayer, k []float32, i0, rows int) {
	m := dc.m
	d := m.d
	if m.kind != kindSynth {
		copy(dl.kc[i0*d:(i0+rows)*d], k)
		return
	}
	n := m.n
	for r := 0; r < rows; r++ {
		for c, v := range k[r*d : r*d+d] {
			dl.kc[c*n+i0+r] = v // head c/DH, row c%DH: (c/DH)·DH·N + (c%DH)·N = c·N
		}
	}
}

// putV stores the values of positions i0 … i0+rows−1 (rows rows of v,
// [rows, D]) in dl's cache.
func (dc *Decoder) putV(dl *decLayer, v []float32, i0, rows int) {
	m := dc.m
	d := m.d
	if m.kind != kindSynth {
		copy(dl.vc[i0*d:(i0+rows)*d], v)
		return
	}
	dh, n := m.dh, m.n
	for r := 0; r < rows; r++ {
		for h := 0; h < m.heads; h++ {
			o := h*n*dh + (i0+r)*dh
			copy(dl.vc[o:o+dh], v[r*d+h*dh:r*d+h*dh+dh])
		}
	}
}

// The step's other few-row products (the attention's over the cached
// positions, dense's w2, and every product where the one-row kernels are
// not used) run on the micro-kernel padded to a whole tile of its MR
// rows: an edge tile of A narrower than MR is packed, zero-padded, into
// the engine's buffer for every tile and inner block of the product,
// which costs as much as the product itself at one row, while a full tile
// is read where it lies, and the kernel computes MR rows either way. So the row is copied into the first row of pa and the product
// written into pc: the other rows of pa hold anything (each row of C
// depends on its own row of A only) and their rows of pc are not read.

// mulPanels computes c = a·Bᵀ for rows rows of a [rows, k] (c [rows, n])
// and B the operand pn holds (mat.Engine.MulPanels).
func (dc *Decoder) mulPanels(c, a []float32, pn *mat.Panels, rows, n, k int) {
	if !dc.mk || rows%dc.mr == 0 {
		dc.eng.MulPanels(c[:rows*n], a[:rows*k], pn, rows, n, k, false)
		return
	}
	r := (rows + dc.mr - 1) / dc.mr * dc.mr
	copy(dc.pa[:rows*k], a[:rows*k])
	dc.eng.MulPanels(dc.pc[:r*n], dc.pa[:r*k], pn, r, n, k, false)
	copy(c[:rows*n], dc.pc[:rows*n])
}

// backX computes the row c = a·w for a [1, n], w [n, k], c [1, k]
// (mat.Engine.LinearBackX).
func (dc *Decoder) backX(c, a, w []float32, k, n int) {
	if !dc.mk || dc.mr == 1 {
		dc.eng.LinearBackX(c[:k], a[:n], w[:n*k], 1, k, n, false)
		return
	}
	r := dc.mr
	copy(dc.pa[:n], a[:n])
	dc.eng.LinearBackX(dc.pc[:r*k], dc.pa[:r*n], w[:n*k], r, k, n, false)
	copy(c[:k], dc.pc[:k])
}

// decRows holds the activations of up to cap positions (of one decoder,
// or of the decoders a DecodeBatch steps together), cap a multiple of the
// micro-kernel's MR so that the products read whole tiles in place; rows
// past the ones in use hold anything (each row of a product, a LayerNorm
// or a GELU depends on its own row only) and are not read.
type decRows struct {
	cap                                        int
	x, h, q, k, v, g, y, xm, u, gl, xf, logits []float32
	mu, rs                                     []float32 // LayerNorm statistics [cap]
	fa, fb                                     []float32 // [cap·Heads, a], [cap·Heads, b]
}

func (m *Model) newDecRows(rows, mr int) *decRows {
	r := (max(rows, 1) + mr - 1) / mr * mr
	d := m.d
	rh := (r*m.heads + mr - 1) / mr * mr
	return &decRows{
		cap: r,
		x:   mat.Alloc(r * d), h: mat.Alloc(r * d), q: mat.Alloc(r * d), k: mat.Alloc(r * d), v: mat.Alloc(r * d),
		g: mat.Alloc(r * d), y: mat.Alloc(r * d), xm: mat.Alloc(r * d), xf: mat.Alloc(r * d),
		u: mat.Alloc(r * m.ffn), gl: mat.Alloc(r * m.ffn), logits: mat.Alloc(r * m.vocab),
		mu: mat.Alloc(r), rs: mat.Alloc(r),
		fa: mat.Alloc(rh * max(m.fa, 1)), fb: mat.Alloc(rh * max(m.fb, 1)),
	}
}

// decRow is one position's attention inputs and output: rows of a
// decRows' matrices.
type decRow struct{ q, k, v, g, fa, fb, y []float32 }

// decRunner runs steps on an engine of its own, over a decRows.
type decRunner struct {
	m    *Model
	w    *decWeights
	eng  *mat.Engine
	mr   int // the micro-kernel's MR (1 without one)
	rows *decRows
}

// lin computes y = x·wᵀ + b for rows rows of x (a multiple of MR, or one
// row on the one-row kernel).
func (r *decRunner) lin(y, x []float32, p *decLin, rows int) {
	if rows == 1 && p.gemv != nil {
		p.gemv(1, x[:p.in], p.gw, p.b, y[:p.out])
		return
	}
	r.eng.MulPanels(y[:rows*p.out], x[:rows*p.in], &p.pn, rows, p.out, p.in, false)
	for i := 0; i < rows; i++ {
		yr := y[i*p.out : i*p.out+p.out]
		b := p.b[:len(yr)]
		for c := range yr {
			yr[c] += b[c]
		}
	}
}

// padRows rounds rows up to a multiple of MR.
func (r *decRunner) padRows(rows int) int { return (rows + r.mr - 1) / r.mr * r.mr }

// stepRows runs one position for each decoder decs[b] (at its own
// position, < N) with token toks[b], the network's rows together (each
// linear layer one product over all of them), the attention decoder by
// decoder on its own caches; each decoder's logits land in its logits.
// Every row's arithmetic is the same whatever the other rows: a decoder's
// results do not depend on the batch it is stepped in.
func (r *decRunner) stepRows(decs []*Decoder, toks []int32) {
	m := r.m
	k := m.Kernels
	d, v := m.d, m.vocab
	rs := r.rows
	R := r.padRows(len(decs))
	if len(decs) == 1 && r.w.gemv {
		R = 1 // a decoder's own step: the one-row kernels, no padding
	}
	for b, dc := range decs {
		i, tok := dc.pos, toks[b]
		dc.toks[i] = tok
		e := m.tokEmb.Data[int(tok)*d : int(tok)*d+d]
		p := m.posEmb.Data[i*d : i*d+d]
		x := rs.x[b*d : b*d+d]
		for c := range x {
			x[c] = e[c] + p[c]
		}
	}
	x := rs.x[:R*d]
	for l := range m.layers {
		ly, lw := &m.layers[l], &r.w.lay[l]
		k.LayerNorm(R, x, ly.ln1w.Data, ly.ln1b.Data, rs.h[:R*d], rs.mu[:R], rs.rs[:R])
		r.lin(rs.v, rs.h, lw.v, R)
		if lw.q != nil {
			r.lin(rs.q, rs.h, lw.q, R)
			r.lin(rs.k, rs.h, lw.k, R)
		}
		if lw.w1 != nil {
			r.lin(rs.g, rs.h, lw.w1, R)
			for c, v := range rs.g[:R*d] {
				if !(v > 0) {
					rs.g[c] = 0
				}
			}
		}
		if lw.fa != nil { // G as [R·Heads, DH]
			rh := r.padRows(len(decs) * m.heads)
			r.lin(rs.fa, rs.g, lw.fa, rh)
			r.lin(rs.fb, rs.g, lw.fb, rh)
		}
		for b, dc := range decs {
			dl, i := &dc.lay[l], dc.pos
			row := decRow{q: rs.q[b*d : b*d+d], k: rs.k[b*d : b*d+d], v: rs.v[b*d : b*d+d], g: rs.g[b*d : b*d+d], y: rs.y[b*d : b*d+d]}
			if lw.fa != nil {
				row.fa = rs.fa[b*m.heads*m.fa : (b+1)*m.heads*m.fa]
				row.fb = rs.fb[b*m.heads*m.fb : (b+1)*m.heads*m.fb]
			}
			if dl.kc != nil {
				dc.putK(dl, row.k, i, 1)
			}
			if dl.vc != nil {
				dc.putV(dl, row.v, i, 1)
			}
			switch m.kind {
			case kindSynth:
				dc.synthRow(ly, dl, i, &row)
			case kindLinear:
				dc.linearRow(dl, &row)
			default:
				dc.aftRow(ly, dl, i, &row)
			}
		}
		// xm = x + o(y)
		r.lin(rs.xm, rs.y, lw.o, R)
		for c, v := range x {
			rs.xm[c] += v
		}
		k.LayerNorm(R, rs.xm[:R*d], ly.ln2w.Data, ly.ln2b.Data, rs.h[:R*d], rs.mu[:R], rs.rs[:R])
		r.lin(rs.u, rs.h, lw.fc1, R)
		k.Gelu(R, rs.u[:R*m.ffn], rs.gl[:R*m.ffn]) // gl = gelu(u); u becomes gelu'(u), unused
		r.lin(x, rs.gl, lw.fc2, R)
		for c, v := range rs.xm[:R*d] {
			x[c] += v
		}
	}
	k.LayerNorm(R, x, m.lnfW.Data, m.lnfB.Data, rs.xf[:R*d], rs.mu[:R], rs.rs[:R])
	if R == 1 && r.w.outGemv != nil {
		r.w.outGemv(1, rs.xf[:d], r.w.outG, nil, rs.logits[:v])
	} else {
		r.eng.MulPanels(rs.logits[:R*v], rs.xf[:R*d], &r.w.out, R, v, d, false)
	}
	for b, dc := range decs {
		copy(dc.logits, rs.logits[b*v:b*v+v])
		dc.pos++
	}
}

// DecodeBatch steps several Decoders of one model, a token each, at once:
// the linear layers of all their rows as one product (on the micro-kernel
// a product of up to MR rows costs what one row costs), the attention
// decoder by decoder on its own caches. Each decoder's logits are exactly
// those its own Next would give (no row's arithmetic depends on the other
// rows), so batching changes the speed only. A DecodeBatch runs on the
// calling goroutine; it is not safe for concurrent use.
type DecodeBatch struct {
	run  decRunner
	decs []*Decoder // this step's decoders after re-encodes
	toks []int32
}

// NewBatch returns a DecodeBatch for up to rows decoders at a time, which
// must be dc and its Siblings (the same packed weights).
func (dc *Decoder) NewBatch(rows int) *DecodeBatch {
	m := dc.m
	eng, _ := m.decodeEngine()
	rows = max(rows, 1)
	return &DecodeBatch{
		run:  decRunner{m: m, w: dc.w, eng: eng, mr: dc.mr, rows: m.newDecRows(rows, dc.mr)},
		decs: make([]*Decoder, 0, rows), toks: make([]int32, 0, rows),
	}
}

// Next is decs[b].Next(toks[b]) for every b, the decoders' rows stepped
// together; each decoder's logits are then its Logits. A decoder whose
// window is full re-encodes alone (Next's policy) first. Misuse (more
// decoders than the batch holds, a decoder twice or of other weights, a
// token outside the vocabulary) panics.
func (bt *DecodeBatch) Next(decs []*Decoder, toks []int32) {
	m := bt.run.m
	if len(decs) != len(toks) || len(decs) > cap(bt.decs) {
		panic(fmt.Sprintf("model: DecodeBatch.Next: %d decoders and %d tokens for a batch of %d", len(decs), len(toks), cap(bt.decs)))
	}
	bt.decs, bt.toks = bt.decs[:0], bt.toks[:0]
	for b, dc := range decs {
		if dc.w != bt.run.w {
			panic("model: DecodeBatch.Next: a decoder that is not a Sibling of the batch's")
		}
		for _, o := range decs[:b] {
			if o == dc {
				panic("model: DecodeBatch.Next: a decoder twice in one step")
			}
		}
		if tok := toks[b]; tok < 0 || int(tok) >= m.vocab {
			panic(fmt.Sprintf("model: DecodeBatch.Next: token %d is out of the vocabulary [0, %d)", tok, m.vocab))
		}
		if dc.pos == m.n {
			dc.Next(toks[b]) // the re-encode
			continue
		}
		bt.decs, bt.toks = append(bt.decs, dc), append(bt.toks, toks[b])
	}
	if len(bt.decs) > 0 {
		bt.run.stepRows(bt.decs, bt.toks)
	}
	clear(bt.decs[:cap(bt.decs)])
}

// Logits are the logits at the decoder's last position (from Prefill,
// Next or a DecodeBatch), valid until its next step.
func (dc *Decoder) Logits() []float32 { return dc.logits }

// step runs position dc.pos < N for tok.
func (dc *Decoder) step(tok int32) []float32 {
	dc.one[0], dc.tok1[0] = dc, tok
	dc.run.stepRows(dc.one[:], dc.tok1[:])
	dc.one[0] = nil
	return dc.logits
}

// synthRow is row i of the synthesizer family's attention (and vanilla's):
// per head the component logits over j ≤ i, their mixture, the softmax and
// the weighted sum of the cached V, into r.y.
func (dc *Decoder) synthRow(ly *layer, dl *decLayer, i int, r *decRow) {
	m := dc.m
	dh, n, t := m.dh, m.n, i+1
	if ly.w2.w != nil { // dense: [Heads, t] = G_h · w2[:t]ᵀ, + bias
		dc.mulPanels(dc.dl, r.g, &dl.w.w2, m.heads, t, dh)
		bias := ly.w2.b.Data[:t]
		for h := 0; h < m.heads; h++ {
			r := dc.dl[h*t : h*t+t]
			for j := range r {
				r[j] += bias[j]
			}
		}
	}
	scale := float32(1 / math.Sqrt(float64(dh)))
	for h := 0; h < m.heads; h++ {
		acc := dc.acc[:t]
		for mi, c := range m.comps {
			b := dc.bl[:t]
			switch c {
			case compVanilla: // b = scale · Q_h·K_hᵀ
				q := r.q[h*dh : h*dh+dh]
				kt := dl.kc[h*dh*n : (h+1)*dh*n]
				if dc.mk {
					// Over all N columns (Kᵀ's rows are N apart); the
					// ones from t on are not read.
					dc.backX(dc.bl, q, kt, n, dh)
				} else {
					clear(b)
					for p, qp := range q {
						axpy(qp, kt[p*n:p*n+t], b)
					}
				}
				for j := range b {
					b[j] *= scale
				}
			case compDense:
				b = dc.dl[h*t : h*t+t]
			case compRandom, compFixedRandom:
				b = ly.r.Data[h*n*n+i*n : h*n*n+i*n+t]
			case compFactRandom:
				nk, fk := n*m.fk, m.fk
				r1 := ly.r1.Data[h*nk+i*fk : h*nk+i*fk+fk]
				r2 := ly.r2.Data[h*nk:]
				for j := range b {
					b[j] = dot(r1, r2[j*fk:j*fk+fk])
				}
			case compFactDense:
				fa := r.fa[h*m.fa : h*m.fa+m.fa]
				fb := r.fb[h*m.fb : h*m.fb+m.fb]
				for j := range b {
					b[j] = fa[j/m.fb] * fb[j%m.fb]
				}
			}
			switch {
			case len(m.comps) == 1:
				acc = b
			case mi == 0:
				w := dl.w.mix[mi]
				for j, v := range b {
					acc[j] = w * v
				}
			default:
				w := dl.w.mix[mi]
				for j, v := range b {
					acc[j] += w * v
				}
			}
		}
		// Softmax over j ≤ i into bl (acc may be R itself: not written).
		p := dc.bl[:t]
		mx := acc[0]
		for _, v := range acc {
			mx = max(mx, v)
		}
		for j, v := range acc {
			p[j] = v - mx
		}
		dc.exp(p)
		var s float32
		for _, v := range p {
			s += v
		}
		inv := 1 / s
		for j := range p {
			p[j] *= inv
		}
		// y_h = p · V_h, V_h the head's [t, DH] cache.
		y := r.y[h*dh : h*dh+dh]
		vh := dl.vc[h*n*dh : h*n*dh+t*dh]
		if dc.mk {
			dc.backX(y, p, vh, dh, t)
			continue
		}
		clear(y)
		for j, w := range p {
			axpy(w, vh[j*dh:j*dh+dh], y)
		}
	}
}

// exp replaces x by e^x: the spec's Exp kernel when it has one.
func (dc *Decoder) exp(x []float32) {
	if f := dc.m.Kernels.Exp; f != nil {
		f(len(x), x)
		return
	}
	expInPlace(x)
}

// aftAdd adds the key k and value v (one row) into the running sums of
// the keys without bias.
func (dc *Decoder) aftAdd(dl *decLayer, k, v []float32) {
	am, den, num := dl.am, dl.aden, dl.anum
	for c, kc := range k[:len(am)] {
		if kc > am[c] {
			s := exp32(am[c] - kc) // 0 for the first key (−Inf)
			den[c] = den[c]*s + 1
			num[c] = num[c]*s + v[c]
			am[c] = kc
		} else {
			e := exp32(kc - am[c])
			den[c] += e
			num[c] += e * v[c]
		}
	}
	dl.n0++
}

// aftRow is row i of the aft variants into r.y: Z from the running sums
// (keys < i+1−win) and the keys since under their biases, then the gate.
func (dc *Decoder) aftRow(ly *layer, dl *decLayer, i int, r *decRow) {
	m := dc.m
	d, n := m.d, m.n
	if m.kind == kindAFTFull {
		dc.aftFullRow(ly, dl, i, r)
		return
	}
	j0 := 0 // first key read under its bias
	switch m.kind {
	case kindAFTSimple:
		dc.aftAdd(dl, r.k[:d], r.v[:d])
		j0 = i + 1
	case kindAFTLocal, kindAFTConv:
		for dl.n0 < i+1-m.window {
			j := dl.n0
			dc.aftAdd(dl, dl.kc[j*d:j*d+d], dl.vc[j*d:j*d+d])
		}
		j0 = dl.n0
	}
	bias := func(j, h int) float32 {
		switch m.kind {
		case kindAFTConv:
			return ly.au.Data[h*m.window+i-j]
		case kindAFTFull, kindAFTLocal:
			return ly.aw.Data[i*n+j]
		}
		return 0
	}
	mx, den, num := dc.mx[:d], dc.den[:d], dc.num[:d]
	if dl.am != nil {
		copy(mx, dl.am)
	} else {
		for c := range mx {
			mx[c] = float32(math.Inf(-1))
		}
	}
	dh := m.dh
	for j := j0; j <= i; j++ {
		kr := dl.kc[j*d : j*d+d]
		for h := 0; h < m.heads; h++ {
			b := bias(j, h)
			for c := h * dh; c < h*dh+dh; c++ {
				mx[c] = max(mx[c], kr[c]+b)
			}
		}
	}
	if dl.am != nil && dl.n0 > 0 {
		for c := range den {
			s := exp32(dl.am[c] - mx[c])
			den[c] = dl.aden[c] * s
			num[c] = dl.anum[c] * s
		}
	} else {
		clear(den)
		clear(num)
	}
	e := dc.z[:d]
	for j := j0; j <= i; j++ {
		kr, vr := dl.kc[j*d:j*d+d], dl.vc[j*d:j*d+d]
		for h := 0; h < m.heads; h++ {
			b := bias(j, h)
			for c := h * dh; c < h*dh+dh; c++ {
				e[c] = kr[c] + b - mx[c]
			}
		}
		dc.exp(e)
		for c, w := range e {
			den[c] += w
			num[c] += w * vr[c]
		}
	}
	for c := range e {
		e[c] = num[c] / den[c]
	}
	m.Kernels.Gate(d, r.q[:d], e, r.y[:d]) // q ← σ(q), y = σ(q)·z
}

// aftFullRow is row i of aft_full into r.y, factorised as in aftfull.go:
// exp(K_jc + w_ij) = exp(w_ij − M_i) · exp(K_jc − κ_c) · exp(M_i + κ_c),
// the last factor cancelling between numerator and denominator, so that
//
//	[num | den] = Ew · X,  Ew_j = exp(w_ij − M_i),  M_i = max_{j≤i} w_ij
//
// is one [1, i+1] × [i+1, 2D] product over the cached factors X_j, and i+1
// exponentials. κ_c is the largest key of channel c so far: a new key
// above it rescales the channel's column of X by exp(κ_old − κ_new) (a new
// maximum is rare after the first positions) so that every factor stays
// ≤ 1. A denominator below aftTiny means the row's largest term may have
// underflowed in that scale: such a channel is computed directly with its
// own maximum, as Forward's aftExact does.
func (dc *Decoder) aftFullRow(ly *layer, dl *decLayer, i int, r *decRow) {
	m := dc.m
	k := m.Kernels
	d, n, t := m.d, m.n, i+1
	kn, vn := r.k[:d], r.v[:d]
	for c, x := range kn {
		if x > dl.kappa[c] || i == 0 {
			if i > 0 {
				s := exp32(dl.kappa[c] - x)
				for j := 0; j < i; j++ {
					dl.ax[j*2*d+c] *= s
					dl.ax[j*2*d+d+c] *= s
				}
			}
			dl.kappa[c] = x
		}
	}
	xi := dl.ax[i*2*d : t*2*d]
	k.AFTFactors(d, kn, dl.kappa, vn, xi[:d], xi[d:])
	ew := dc.bl[:t]
	wr := ly.aw.Data[i*n : i*n+t]
	mx := wr[0]
	for _, v := range wr {
		mx = max(mx, v)
	}
	for j, v := range wr {
		ew[j] = v - mx
	}
	dc.exp(ew)
	nd := dc.acc[:2*d]
	x := dl.ax[:t*2*d]
	if dc.mk {
		dc.backX(nd, ew, x, 2*d, t)
	} else {
		clear(nd)
		for j, w := range ew {
			axpy(w, x[j*2*d:(j+1)*2*d], nd)
		}
	}
	z := dc.z[:d]
	for c := range z {
		if den := nd[d+c]; den >= aftTiny {
			z[c] = nd[c] / den
			continue
		}
		// Directly, with the (i, c)'s own maximum.
		best := float32(math.Inf(-1))
		for j, b := range wr {
			best = max(best, dl.kc[j*d+c]+b)
		}
		var sum, num float32
		for j, b := range wr {
			e := exp32(dl.kc[j*d+c] + b - best)
			sum += e
			num += e * dl.vc[j*d+c]
		}
		z[c] = num / sum
	}
	k.Gate(d, r.q[:d], z, r.y[:d]) // q ← σ(q), y = σ(q)·z
}

// linAdd adds φ(K_j) (fk) and V_j (one row) into linear attention's
// running S and z.
func (dc *Decoder) linAdd(dl *decLayer, fk, v []float32) {
	m := dc.m
	dh := m.dh
	for h := 0; h < m.heads; h++ {
		s := dl.ls[h*dh*dh : h*dh*dh+dh*dh]
		z := dl.lz[h*dh : h*dh+dh]
		vh := v[h*dh : h*dh+dh]
		for p, f := range fk[h*dh : h*dh+dh] {
			z[p] += f
			axpy(f, vh, s[p*dh:p*dh+dh])
		}
	}
}

// linearRow is row i of linear attention into r.y.
func (dc *Decoder) linearRow(dl *decLayer, r *decRow) {
	m := dc.m
	d, dh := m.d, m.dh
	for c, x := range r.q[:d] {
		r.q[c] = elu1(x)
	}
	for c, x := range r.k[:d] {
		r.k[c] = elu1(x)
	}
	dc.linAdd(dl, r.k[:d], r.v[:d])
	for h := 0; h < m.heads; h++ {
		s := dl.ls[h*dh*dh : h*dh*dh+dh*dh]
		fq := r.q[h*dh : h*dh+dh]
		rd := 1 / (dot(fq, dl.lz[h*dh:h*dh+dh]) + 1e-6)
		y := r.y[h*dh : h*dh+dh]
		clear(y)
		for p, f := range fq {
			axpy(f, s[p*dh:p*dh+dh], y)
		}
		for c := range y {
			y[c] *= rd
		}
	}
}

// dot is Σ a[p]·b[p] over len(a).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	p := 0
	for ; p+4 <= len(a); p += 4 {
		s0 += a[p] * b[p]
		s1 += a[p+1] * b[p+1]
		s2 += a[p+2] * b[p+2]
		s3 += a[p+3] * b[p+3]
	}
	for ; p < len(a); p++ {
		s0 += a[p] * b[p]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy adds alpha·x to y over len(x).
func axpy(alpha float32, x, y []float32) {
	y = y[:len(x)]
	for c, v := range x {
		y[c] += alpha * v
	}
}
