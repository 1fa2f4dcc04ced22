package model

import (
	"fmt"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/mat"
)

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
