package model

import (
	"fmt"
	"math"
	"sync"

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
//     the cached V_j. K and V are kept per head, [t, DH] rows, so that
//     the scores and the weighted sum are each one pass over a contiguous
//     cache: the spec's one-row kernels VanillaScores (the scores) and
//     AttendDH (the softmax and the weighted sum, which every variant of
//     the family runs on its logits), or plain loops and the matrix
//     engine where a spec lacks them.
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
// Prefill: Prefill runs all the tokens but the last as one batched
// forward pass (the spec's kernels, on the model's workers) and copies K,
// V of every layer out of its workspace (for linear attention the
// workspace holds φ(K) in place of K), from which the running sums above
// are formed in position order, as the steps would have formed them; then
// the last token is one step, whose logits Prefill returns. The forward
// pass stops in the last layer once K and V are formed (forwardKV): the
// rest of that layer, lnf and the logits are needed at the last position
// only, which the step computes: a prefill of t tokens costs the first
// L − 1 layers of a Forward at t − 1, the last layer's K and V products,
// and one step (of a 4-layer model's Forward, about three quarters).
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
// Forward on those c tokens. The cost of a re-encode, one prefill at n/2,
// is spread over the n/2 tokens that follow it. Forward on the last n
// tokens for every token (the old sampler, kept in runtime/synth as the
// tests' oracle) sees c = n always, at the cost of a full Forward per token.
//
// Files: decode.go the Decoder, its caches, Prefill and Next;
// decode_weights.go the packed weights (NewDecoder, Sibling);
// decode_batch.go the step over one or several decoders' rows (decRunner,
// DecodeBatch); decode_synth.go, decode_aft.go and decode_linear.go the
// attention row of each family; decode_ops.go the small products they share.

// Decoder is the incremental state of one sequence on a Model (see the
// comment above for what it caches). Make one with NewDecoder; it is not
// safe for concurrent use, but any number of Decoders of one Model may
// step concurrently: a step reads the parameters and runs on its own
// goroutine (one core), without the model's workers. Prefill runs a
// forward pass on the model's workers under a lock the model's Decoders share;
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

type decLayer struct {
	w *decLayerW // the layer's weights
	// Cached K and V. The aft variants (aft_full/local/conv): K and V
	// [N, D]. The synthesizer family: V [Heads][N, DH] (one contiguous
	// [t, DH] matrix per head for the weighted sum's product) and, with
	// vanilla, K [Heads][N, DH] likewise (see put).
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
// tokens at positions 0, 1, … (all but the last with one batched forward
// pass, the last with a step), and returns the logits at the last of them (vocab floats, valid until the decoder's
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
	if t > 1 {
		dc.prefillKV(t - 1)
	}
	dc.pos = t - 1
	return dc.step(dc.toks[t-1])
}

// prefillKV fills the caches with positions 0 … t−1 of dc.toks, from one
// batched forward (forwardKV) on the model's workers.
func (dc *Decoder) prefillKV(t int) {
	m := dc.m
	sh := &m.prefill
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.ws == nil {
		sh.ws = m.NewWorkspace(1)
	}
	ws := sh.ws
	m.forwardKV(ws, dc.toks[:t])
	d := m.d
	for l := range dc.lay {
		dl, lw := &dc.lay[l], &ws.lay[l]
		if dl.kc != nil {
			dc.put(dl.kc, lw.k[:t*d], 0, t)
		}
		if dl.vc != nil {
			dc.put(dl.vc, lw.v[:t*d], 0, t)
		}
		switch m.kind {
		case kindAFTSimple, kindAFTLocal, kindAFTConv:
			for j := 0; j < t-dc.win(); j++ {
				dc.aftAdd(dl, lw.k[j*d:j*d+d], lw.v[j*d:j*d+d])
			}
		case kindLinear:
			// lw.k holds φ(K) (the attention applies φ in place), but for
			// the last layer, where forwardKV stopped before it: K.
			if l == len(dc.lay)-1 {
				for c, x := range lw.k[:t*d] {
					lw.k[c] = elu1(x)
				}
			}
			for j := 0; j < t; j++ {
				dc.linAdd(dl, lw.k[j*d:j*d+d], lw.v[j*d:j*d+d])
			}
		case kindAFTFull:
			m.aftKappa(dl.kappa, lw.k, t)
			for j := 0; j < t; j++ {
				x := dl.ax[j*2*d : (j+1)*2*d]
				m.Kernels.AFTFactors(d, lw.k[j*d:j*d+d], dl.kappa, lw.v[j*d:j*d+d], x[:d], x[d:])
			}
		}
	}
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

// put stores rows of positions i0 … i0+rows−1 (rows rows of x, [rows, D],
// keys or values) in cache c: as they are ([N, D]) for the aft variants,
// per head ([Heads][N, DH], each head's [t, DH] rows contiguous) for the
// Synthesizer family.
func (dc *Decoder) put(c, x []float32, i0, rows int) {
	m := dc.m
	d := m.d
	if m.kind != kindSynth {
		copy(c[i0*d:(i0+rows)*d], x)
		return
	}
	dh, n := m.dh, m.n
	for r := 0; r < rows; r++ {
		for h := 0; h < m.heads; h++ {
			o := h*n*dh + (i0+r)*dh
			copy(c[o:o+dh], x[r*d+h*dh:r*d+h*dh+dh])
		}
	}
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
