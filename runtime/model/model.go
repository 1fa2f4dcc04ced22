// Package model is the network of the model card (docs/model.md):
// a causal, byte-level language model with pre-norm blocks whose attention
// (vanilla, the synthesizer variants and their "+" mixtures, the
// attention-free variants aft_full, aft_local, aft_simple and aft_conv, and
// linear attention) runs on a spec's generated kernels, with its forward pass, its backward pass and
// its parameters.
//
// The linear layers run on runtime/mat, everything on a fixed pool of
// goroutine workers (runtime/parallel). Work is cut into tasks whose
// arithmetic depends only on the task number, and every sum across tasks is
// reduced in a fixed order, so losses and gradients are bit-identical for
// any number of workers. After NewWorkspace, Forward and Backward do not
// allocate.
//
// Memory choice for the backward: the forward keeps, per layer, the
// LayerNorm inputs' statistics, the projections (q, k, v, relu(w1·h), fa, fb),
// the attention output, the GELU of fc1's output and its derivative, and the attention
// probabilities A of every (layer, sequence, head) as [t, N] blocks; the
// backward turns each A block into dB in place (SoftmaxValueBack allows db
// to alias a), which random's dR reduction then reads. A mixture's
// component logits are recomputed in the backward (for the mix gradient)
// rather than kept. The attention-free variants keep no [t, t] block: the
// forward keeps σ(Q) (in place of Q), K, V, the normalised sum Z and the
// kernels' per-channel statistics m and rd; linear attention keeps φ(Q)
// and φ(K) (in place of Q and K; φ'(x) = min(φ(x), 1)) and its [t, Heads]
// statistic rd (see aft.go).
package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"

	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/mat"
	"github.com/synthgen/synthgen/runtime/parallel"
	"github.com/synthgen/synthgen/specs"
)

// Param is one named tensor of the card.
type Param struct {
	Name   string    // checkpoint name, e.g. "layers.0.attn.q.weight" (the card's names exactly)
	Shape  []int     // PyTorch-style shape, e.g. [out, in] for a linear weight
	Data   []float32 // row-major values
	Grad   []float32 // gradient from the last Backward (overwritten each time); nil when Frozen
	Decay  bool      // AdamW weight decay applies: every ≥2-D tensor (linear weights, tok_emb, pos_emb, R, R1, R2, aft w); not biases, LayerNorm, mix, u
	Frozen bool      // saved but never updated: fixed_random's R
	// CausalTri marks a stack of n×n matrices (the last two dimensions of
	// Shape, equal) whose strict upper triangle (column > row) never gets a
	// gradient: the causal mask hides it from every forward, so Backward
	// leaves its Grad 0 there. The optimizer only decays those elements
	// (their moments stay 0). Set on a causal spec's trained R.
	CausalTri bool
}

// comp is one logit source of the attention (a mixture has several).
type comp int

const (
	compVanilla comp = iota
	compDense
	compRandom
	compFixedRandom
	compFactRandom
	compFactDense
)

var compNames = map[string]comp{
	"vanilla": compVanilla, "dense": compDense, "random": compRandom,
	"fixed_random": compFixedRandom, "factorized_random": compFactRandom,
	"factorized_dense": compFactDense,
}

// linear is a linear layer's parameters: weight [out, in], bias [out].
type linear struct {
	w, b    *Param
	in, out int
}

type layer struct {
	ln1w, ln1b, ln2w, ln2b *Param
	q, k, v, o             linear
	w1, w2, fa, fb         linear
	r, r1, r2, mix         *Param
	aw, au                 *Param // aft_full / aft_local's w [n, n], aft_conv's u [heads, window]
	fc1, fc2               linear
}

// Model is the network of one spec with its parameters. A Model runs one
// Forward or Backward at a time (its worker pool and matrix engine are
// shared by its workspaces); the parameters' Data may be changed between
// calls, in place or by assigning slices of the same length.
type Model struct {
	Spec    specs.Spec
	Kernels *kernels.Kernels
	Params  []*Param // fixed order: tok_emb, pos_emb, then layer by layer, then lnf, then a classifier's head

	// Labels are a classifier's label strings in class order (the
	// checkpoint's "labels" metadata); nil for a language model, and for
	// a classifier until the caller sets them (len(Labels) = Spec.Classes).
	Labels []string

	comps []comp
	kind  attnKind // kindSynth, or the attention-free / linear variant
	// aftKernels runs aft_full through its per-row kernels (AFTFull) rather
	// than as matrix products (aftfull.go): the tests' second opinion. Set
	// before NewWorkspace.
	aftKernels bool
	window     int  // aft_local's and aft_conv's window
	hasQK      bool // vanilla and the attention-free / linear variants
	hasG       bool // dense or factorized_dense: G = relu(w1(h))
	tokEmb     *Param
	posEmb     *Param
	lnfW       *Param
	lnfB       *Param
	headW      *Param // a classifier's head.weight [classes, d]
	headB      *Param // a classifier's head.bias [classes]
	classes    int    // a classifier's K; 0 for a language model
	layers     []layer
	n, d, dh   int
	heads      int
	vocab      int
	ffn        int
	fk         int // factorized_random's k
	fa, fb     int // factorized_dense's a and b

	layoutOnly bool // build makes parameters without Data and Grad (Layout)

	pools   *poolHolder
	eng     *mat.Engine
	scratch [][]float32 // per worker, [N, N]: mixture logits
	strips  []stripBF   // per worker: the strip path's buffers (strips_bf16.go)
	shared  []sharedBF  // per worker: the shared path's strips' buffers (attention_bf16.go)
	jobs    jobs
	prefill prefillShared // the Decoders' Forward (decode.go)
}

// poolHolder lets a cleanup close the current pool once the Model is gone.
type poolHolder struct{ pool *parallel.Pool }

// New builds the network of spec on the dispatched kernels k (from
// kernels.Lookup(spec.Name)), initialised per the card deterministically
// from seed: N(0, 0.02²) linear weights (a classifier's head among them),
// embeddings and synthesizer matrices, zero biases, LayerNorm weight 1 and bias 0, fixed_random's R
// ~ N(0, 1), mix 0, the attention-free variants' w and u 0.
func New(spec specs.Spec, k *kernels.Kernels, seed uint64) (*Model, error) {
	m, err := skeleton(spec)
	if err != nil {
		return nil, err
	}
	if k == nil {
		return nil, fmt.Errorf("model: spec %q: no kernels (use kernels.Lookup)", spec.Name)
	}
	ks := k.Spec
	// Task and Classes may differ: the kernels do not depend on the head
	// (a classifier may run on a language model's kernels). The mask does:
	// masked kernels under a bidirectional spec (or the reverse) would
	// compute another network without a word.
	if ks.N != spec.N || ks.D != spec.D || ks.Heads != spec.Heads || ks.Variant != spec.Variant ||
		ks.K != spec.K || ks.A != spec.A || ks.B != spec.B || ks.Window != spec.Window || ks.FFN != spec.FFN || ks.Vocab != spec.Vocab ||
		ks.Bidirectional != spec.Bidirectional {
		return nil, fmt.Errorf("model: spec %q (variant %s, n %d, d %d, heads %d, ffn %d, vocab %d, causal %t) does not match the kernels of spec %q (variant %s, n %d, d %d, heads %d, ffn %d, vocab %d, causal %t)",
			spec.Name, spec.Variant, spec.N, spec.D, spec.Heads, spec.FFN, spec.Vocab, spec.Causal(), ks.Name, ks.Variant, ks.N, ks.D, ks.Heads, ks.FFN, ks.Vocab, ks.Causal())
	}
	m.Kernels = k
	if err := m.checkKernels(); err != nil {
		return nil, err
	}
	m.build()
	m.init(seed)
	m.pools = &poolHolder{}
	m.eng = mat.NewEngine(nil)
	if k.Chosen["GemmTile"] > kernels.Go { // the Go micro-kernel is slower than mat's plain path
		m.eng.SetGemm(k.GemmTile, k.GemmShape)
	}
	m.SetWorkers(0)
	runtime.AddCleanup(m, func(h *poolHolder) {
		if h.pool != nil {
			h.pool.Close()
		}
	}, m.pools)
	return m, nil
}

// skeleton is the Model of spec with its sizes and structure set, but no
// kernels, parameters or workers yet.
func skeleton(spec specs.Spec) (*Model, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("model: invalid spec %q: %w", spec.Name, err)
	}
	kind, ok := attnFreeKinds[spec.Variant]
	if !spec.IsSynthesizer() && !ok {
		return nil, fmt.Errorf("model: spec %q: variant %q is not supported (runtime/model implements vanilla, the synthesizer family and their mixtures, aft_full, aft_local, aft_simple, aft_conv and linear)", spec.Name, spec.Variant)
	}
	m := &Model{
		Spec: spec,
		n:    spec.N, d: spec.D, dh: spec.DH(), heads: spec.Heads, vocab: spec.Vocab, ffn: spec.FFN,
		fk: spec.K, fa: spec.A, fb: spec.B, kind: kind, window: spec.Window,
	}
	if spec.IsClassifier() {
		m.classes = spec.Classes
	}
	if kind == kindSynth {
		for _, c := range spec.Components() {
			m.comps = append(m.comps, compNames[c])
		}
	}
	m.hasQK = spec.Has("vanilla") || kind != kindSynth
	m.hasG = spec.Has("dense") || spec.Has("factorized_dense")
	return m, nil
}

// Layout lists the parameters of spec's network in the card's order, with
// their names, shapes, Decay and Frozen, but no Data or Grad: what a
// checkpoint of spec holds, known without kernels or memory for weights.
func Layout(spec specs.Spec) ([]*Param, error) {
	m, err := skeleton(spec)
	if err != nil {
		return nil, err
	}
	m.layoutOnly = true
	m.build()
	return m.Params, nil
}

func (m *Model) checkKernels() error {
	k := m.Kernels
	var missing []string
	need := func(ok bool, name string) {
		if !ok {
			missing = append(missing, name)
		}
	}
	need(k.LayerNorm != nil, "LayerNorm")
	need(k.LayerNormBack != nil, "LayerNormBack")
	need(k.LayerNormGrad != nil, "LayerNormGrad")
	need(k.Gelu != nil, "Gelu")
	need(k.GeluBack != nil, "GeluBack")
	need(k.SoftmaxStats != nil, "SoftmaxStats")
	need(k.SoftmaxScale != nil, "SoftmaxScale")
	if m.kind != kindSynth {
		m.needAttnFree(need)
		if len(missing) > 0 {
			return lacksErr(m.Spec.Name, missing)
		}
		return nil
	}
	need(k.SoftmaxValue != nil, "SoftmaxValue")
	need(k.SoftmaxValueBack != nil, "SoftmaxValueBack")
	need(k.TriScale != nil, "TriScale")
	need(k.TriAxpy != nil, "TriAxpy")
	need(k.TriDot != nil, "TriDot")
	for _, c := range m.comps {
		switch c {
		case compVanilla:
			need(k.VanillaLogits != nil, "VanillaLogits")
			need(k.VanillaLogitsBackX != nil, "VanillaLogitsBackX")
			need(k.VanillaLogitsBackW != nil, "VanillaLogitsBackW")
		case compDense:
			need(k.DenseLogits != nil, "DenseLogits")
			need(k.DenseLogitsBackX != nil, "DenseLogitsBackX")
			need(k.DenseLogitsBackW != nil, "DenseLogitsBackW")
		case compFactRandom:
			need(k.FactRandomLogits != nil, "FactRandomLogits")
			need(k.FactRandomLogitsBackX != nil, "FactRandomLogitsBackX")
			need(k.FactRandomLogitsBackW != nil, "FactRandomLogitsBackW")
		case compFactDense:
			need(k.FactDenseLogits != nil, "FactDenseLogits")
			need(k.FactDenseLogitsBack != nil, "FactDenseLogitsBack")
		}
	}
	if len(missing) > 0 {
		return lacksErr(m.Spec.Name, missing)
	}
	return nil
}

// lacksErr is checkKernels' error for the kernels missing from spec
// name's set.
func lacksErr(name string, missing []string) error {
	return fmt.Errorf("model: spec %q: the kernel set lacks %v (a package generated by an older synthgen? run go generate on it)", name, missing)
}

// build creates the parameters in the card's order.
func (m *Model) build() {
	add := func(name string, shape ...int) *Param {
		n := 1
		for _, s := range shape {
			n *= s
		}
		p := &Param{Name: name, Shape: shape, Decay: len(shape) >= 2}
		if !m.layoutOnly {
			p.Data, p.Grad = mat.Alloc(n), mat.Alloc(n)
		}
		m.Params = append(m.Params, p)
		return p
	}
	lin := func(name string, in, out int) linear {
		return linear{w: add(name+".weight", out, in), b: add(name+".bias", out), in: in, out: out}
	}
	d, n, h := m.d, m.n, m.heads
	m.tokEmb = add("tok_emb", m.vocab, d)
	m.posEmb = add("pos_emb", n, d)
	m.layers = make([]layer, m.Spec.Layers)
	for l := range m.layers {
		ly := &m.layers[l]
		pre := fmt.Sprintf("layers.%d.", l)
		ly.ln1w = add(pre+"ln1.weight", d)
		ly.ln1b = add(pre+"ln1.bias", d)
		if m.hasQK {
			ly.q = lin(pre+"attn.q", d, d)
			ly.k = lin(pre+"attn.k", d, d)
		}
		ly.v = lin(pre+"attn.v", d, d)
		ly.o = lin(pre+"attn.o", d, d)
		switch m.kind {
		case kindAFTFull, kindAFTLocal:
			ly.aw = add(pre+"attn.w", n, n)
		case kindAFTConv:
			ly.au = add(pre+"attn.u", h, m.uWidth())
			ly.au.Decay = false
		}
		if m.hasG {
			ly.w1 = lin(pre+"attn.w1", d, d)
		}
		if m.Spec.Has("dense") {
			ly.w2 = lin(pre+"attn.w2", m.dh, n)
		}
		if m.Spec.Has("factorized_dense") {
			ly.fa = lin(pre+"attn.fa", m.dh, m.fa)
			ly.fb = lin(pre+"attn.fb", m.dh, m.fb)
		}
		if m.Spec.Has("random") || m.Spec.Has("fixed_random") {
			ly.r = add(pre+"attn.R", h, n, n)
			if m.Spec.Has("fixed_random") {
				ly.r.Frozen = true
				ly.r.Grad = nil
			} else {
				// Row i of a causal spec's R meets positions j ≤ i only.
				ly.r.CausalTri = !m.Spec.Bidirectional
			}
		}
		if m.Spec.Has("factorized_random") {
			ly.r1 = add(pre+"attn.R1", h, n, m.fk)
			ly.r2 = add(pre+"attn.R2", h, n, m.fk)
		}
		if len(m.comps) > 1 {
			ly.mix = add(pre+"attn.mix", len(m.comps))
		}
		ly.ln2w = add(pre+"ln2.weight", d)
		ly.ln2b = add(pre+"ln2.bias", d)
		ly.fc1 = lin(pre+"fc1", d, m.ffn)
		ly.fc2 = lin(pre+"fc2", m.ffn, d)
	}
	m.lnfW = add("lnf.weight", d)
	m.lnfB = add("lnf.bias", d)
	if m.classes > 0 {
		m.headW = add("head.weight", m.classes, d)
		m.headB = add("head.bias", m.classes)
	}
}

// init fills the parameters per the card from one PCG stream, in Params order.
func (m *Model) init(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	normal := func(p *Param, std float64) {
		for i := range p.Data {
			p.Data[i] = float32(rng.NormFloat64() * std)
		}
	}
	isLN := map[*Param]bool{m.lnfW: true}
	isZero := map[*Param]bool{}
	for _, ly := range m.layers {
		isLN[ly.ln1w] = true
		isLN[ly.ln2w] = true
		isZero[ly.aw] = ly.aw != nil
		isZero[ly.au] = ly.au != nil
	}
	for _, p := range m.Params {
		switch {
		case isZero[p]: // aft's w and u
			clear(p.Data)
		case isLN[p]:
			for i := range p.Data {
				p.Data[i] = 1
			}
		case p.Frozen: // fixed_random's R
			normal(p, 1)
		case len(p.Shape) >= 2:
			normal(p, 0.02)
		default: // biases, LayerNorm biases, mix
			clear(p.Data)
		}
	}
}

// Param returns the parameter called name, or nil if absent.
func (m *Model) Param(name string) *Param {
	for _, p := range m.Params {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// NumParams is the total element count of the parameters.
func (m *Model) NumParams() int {
	n := 0
	for _, p := range m.Params {
		n += len(p.Data)
	}
	return n
}

// SetWorkers sets the number of goroutine workers (n < 1: the default,
// runtime.GOMAXPROCS(0)). Results are bit-identical for every n. It must not
// be called during Forward or Backward.
func (m *Model) SetWorkers(n int) {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	if m.pools.pool != nil {
		if m.pools.pool.Size() == n {
			return
		}
		m.pools.pool.Close()
	}
	m.pools.pool = parallel.New(n)
	m.eng.SetPool(m.pools.pool)
	if len(m.comps) > 1 {
		for len(m.scratch) < n {
			m.scratch = append(m.scratch, mat.Alloc(m.n*m.n))
		}
	}
}

// Workers is the number of goroutine workers.
func (m *Model) Workers() int { return m.pools.pool.Size() }

func (m *Model) run(tasks int, job parallel.Job) { m.pools.pool.Run(tasks, job) }

// Run runs tasks 0..tasks−1 of job on the model's workers and returns when
// all are done (for passes over the parameters, such as the optimizer's).
// Like Forward, it must not be called concurrently with the model's other
// methods.
func (m *Model) Run(tasks int, job parallel.Job) {
	defer runtime.KeepAlive(m)
	m.run(tasks, job)
}

// mixWeights writes softmax(mix) into w.
func mixWeights(mix []float32, w []float32) {
	mx := math.Inf(-1)
	for _, v := range mix {
		mx = math.Max(mx, float64(v))
	}
	s := 0.0
	for _, v := range mix {
		s += math.Exp(float64(v) - mx)
	}
	for i, v := range mix {
		w[i] = float32(math.Exp(float64(v)-mx) / s)
	}
}

// SetBF16 runs the linear layers' products (forward and both backward
// products), aft_full's factorised products (aftfull.go), random's,
// fixed random's and factorized random's attention products
// (attention_bf16.go: P·V and its backward) and vanilla's and dense's
// (strips_bf16.go: the logits, P·V and their backward), the last two
// when the spec has the SoftmaxRows kernels, on bf16 kernel k:
// bf16 operands, float32 accumulation and output; the weights, their
// gradients, the softmax and everything else stay float32. nil returns
// them to float32. It must not be called during Forward or Backward, nor
// between a Forward and its Backward.
func (m *Model) SetBF16(k *bf16.Kernel) {
	if m.eng.BF16Kernel() != k {
		m.strips, m.shared = nil, nil // sized for another kernel's blocks
	}
	m.eng.SetBF16(k)
}

// BF16 is the level of the linear layers' bf16 kernel (bf16.None: they run
// in float32).
func (m *Model) BF16() bf16.Level { return m.eng.BF16() }
