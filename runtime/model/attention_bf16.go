package model

import (
	"github.com/synthgen/synthgen/runtime/bf16"
)

// The attention of random, fixed random and factorized random on the bf16
// path (SetBF16, with the spec's SoftmaxRows kernels), the shared path.
// Their logits B_h (R_h, or R1_h·R2_hᵀ) do not depend on the input, so
// neither do the probabilities P = softmax(B_h): they are the same for
// every sequence of a batch. Each head is one task on one worker, which
// makes a strip of 64 rows of P once for all the batch's sequences while
// it is in the worker's caches, and makes it again in the backward rather
// than keeping P (as the strip path does from recomputeN on,
// strips_bf16.go):
//
//	forward, per strip S of rows [i0, i1):
//	  P_S = softmax(B_S)               B_S = R_h's rows, or R1_S·R2ᵀ on the bf16 kernel
//	  Y_s,S = P_S·V_s                  every sequence s, bf16 kernel
//
//	backward, per strip:
//	  P_S again, the same bits
//	  dV_s += P_Sᵀ·dY_s,S              every s, bf16 kernel, float32 sums over the strips
//	  G_S = Σ_s dY_s,S·V_sᵀ            one bf16 product, the sequences' depths joined
//	  dB_S = P_S ⊙ (G_S − rowsum(P_S ⊙ G_S))   SoftmaxRowsBack: random's straight into R's gradient
//	  dR1_S = dB_S·R2, dR2 += dB_Sᵀ·R1_S       factorized random's, bf16 kernel
//
// Random's P is softmax(R_h) in float32, as on the float32 path; factorized
// random's logits are a bf16 product (its k = 8 padded to 32). Before,
// this path made P whole once per head and layer and kept it, and ran the
// value products and G over whole [t, t] blocks (mat.MulBatchBF16), with
// passes over 8–16 MB blocks a head out of cache; a strip at a time the
// bf16 step ran 39% faster at long2048_factorized_random and 9.5% at
// long2048_random (docs/bf16.md). The float32 path fuses the softmax with
// the value product per sequence (SoftmaxValue, SoftmaxValueBack) and sums
// the gradients over the sequences; they are the same function of the
// inputs, rounded and summed in other orders. Fixed random has no
// gradient: its backward is dV alone.
//
// A head a task keeps at most Heads workers busy here (4 in the shipped
// specs, against the 2 cores this is measured on); more would split a
// head's strips across tasks, with partial sums of dV_s and dR2 to reduce.
//
// Vanilla's and dense's attention, whose P is a sequence's own, runs on the
// strip path (strips_bf16.go). Factorized dense and the other mixtures
// keep the fused float32 kernels on the bf16 path.

// bfAttention reports whether the attention runs on the shared path: one
// random, fixed random or factorized random component, a bf16 kernel and
// the spec's SoftmaxRows kernels.
func (m *Model) bfAttention() bool {
	return m.kind == kindSynth && len(m.comps) == 1 &&
		(m.comps[0] == compRandom || m.comps[0] == compFixedRandom || m.comps[0] == compFactRandom) &&
		m.eng.BF16() != bf16.None && m.Kernels.SoftmaxRows != nil && m.Kernels.SoftmaxRowsBack != nil
}

// sharedBF is one worker's buffers for the shared path's strips, beside
// its stripBF, sized for b sequences.
type sharedBF struct {
	b  int
	vb []uint16 // every V_s as B panels, a channel a column, depth Pad(N) keys
	vk []uint16 // the V_s as B panels, a key a column, their depths joined: b·Pad(dh)
	sa []uint16 // a strip of the dY_s as A blocks, their depths joined
}

// sharedScratch makes sure every worker has its strip buffers, and shared
// ones for b sequences.
func (m *Model) sharedScratch(b int) {
	m.stripScratch()
	for len(m.shared) < m.Workers() {
		m.shared = append(m.shared, sharedBF{})
	}
	for w := range m.shared {
		if m.shared[w].b < b {
			m.shared[w] = newSharedBF(m.eng.BF16Kernel(), m.n, m.dh, b)
		}
	}
}

// newSharedBF returns one worker's shared buffers for kernel kn, N = n,
// head width dh and b sequences.
func newSharedBF(kn *bf16.Kernel, n, dh, b int) sharedBF {
	kpG := b * bf16.Pad(dh)
	keyPanels, chPanels := (n+bf16.NR-1)/bf16.NR, (dh+bf16.NR-1)/bf16.NR
	return sharedBF{
		b:  b,
		vb: make([]uint16, b*chPanels*bf16.BPanel(bf16.Pad(n))),
		vk: make([]uint16, keyPanels*bf16.BPanel(kpG)),
		sa: make([]uint16, strip/kn.MR*kn.ABlock(kpG)),
	}
}

// sharedTask is one head's operands on the shared path's strips.
type sharedTask struct {
	kn       *bf16.Kernel
	sc       *stripBF
	sh       *sharedBF
	t, n, b  int
	d, dh    int
	kpH, kpN int
	causal   bool
	soft     func(t, i0, i1 int, b, a []float32)
	h        int
	r        []float32 // random's and fixed random's R_h (rows N apart); nil: factorized
	fact     stripTask // factorized random's logits R1_h·R2_hᵀ as a product
}

// sharedTask returns head h's operands in layer l with worker buffers sc
// and sh.
func (m *Model) sharedTask(ws *Workspace, l, h int, sc *stripBF, sh *sharedBF) sharedTask {
	ly := &m.layers[l]
	k := sharedTask{
		kn: m.eng.BF16Kernel(), sc: sc, sh: sh,
		t: ws.t, n: m.n, b: ws.b, d: m.d, dh: m.dh, kpH: bf16.Pad(m.dh), kpN: bf16.Pad(m.n),
		causal: m.Spec.Causal(), soft: m.Kernels.SoftmaxRows, h: h,
	}
	if ly.r1 != nil {
		nk := m.n * m.fk
		k.fact = stripTask{
			kn: k.kn, sc: sc, t: k.t, d: m.fk, dh: m.fk, n: m.n, kpH: bf16.Pad(m.fk), kpN: k.kpN,
			causal: k.causal, scale: 1, wp: 1,
			x: ly.r1.Data[h*nk:], w: ly.r2.Data[h*nk:], ldw: m.fk,
		}
	} else {
		nn := m.n * m.n
		k.r = ly.r.Data[h*nn : h*nn+nn]
	}
	return k
}

// keys is the number of keys rows [i0, i1) read: i1 under the causal mask.
func (k *sharedTask) keys(i1 int) int {
	if k.causal {
		return i1
	}
	return k.t
}

// prepare packs what probs reads: R2_h as B panels (factorized random).
func (k *sharedTask) prepare() {
	if k.r == nil {
		k.fact.packKeys(k.sc.kb, k.fact.w, k.fact.ldw)
	}
}

// probs writes strip [i0, i1)'s probabilities to the worker's strip
// buffer p (rows N apart), 0 above the diagonal up to key i1 (causal):
// softmax(R_h)'s rows, or softmax(R1_h·R2_hᵀ)'s, its logits on the bf16
// kernel (after prepare). The forward, the backward and AttentionMap make
// the same bits.
func (k *sharedTask) probs(i0, i1 int) {
	if k.r == nil {
		k.fact.probs(i0, i1, k.soft, k.sc.p, nil)
		return
	}
	p, n, keys := k.sc.p, k.n, k.keys(i1)
	k.soft(k.t, i0, i1, k.r[i0*n:], p)
	if k.causal {
		for i := i0; i < i1; i++ {
			clear(p[(i-i0)*n+i+1 : (i-i0)*n+keys])
		}
	}
}

// base is sequence s's offset of the head in the [rows, d] activations.
func (k *sharedTask) base(s int) int { return s*k.t*k.d + k.h*k.dh }

// forward is the head's forward: Y_s for every sequence s.
func (k *sharedTask) forward(y, v []float32) {
	kn, sc, n := k.kn, k.sc, k.n
	vbs := (k.dh + bf16.NR - 1) / bf16.NR * bf16.BPanel(k.kpN)
	for s := 0; s < k.b; s++ {
		bf16.PackBT(k.sh.vb[s*vbs:], v[k.base(s):], k.d, k.dh, k.t, k.kpN, 0, k.kpN, sc.tmp)
	}
	k.prepare()
	for i0 := 0; i0 < k.t; i0 += strip {
		i1 := min(i0+strip, k.t)
		rows, keys := i1-i0, k.keys(i1)
		k.probs(i0, i1)
		packStrip(kn, sc.sa, bf16.LDA(k.kpN), 0, sc.p, n, 0, rows, keys)
		for s := 0; s < k.b; s++ {
			kn.TileRow(k.kpN, 0, bf16.Pad(keys), sc.sa, k.sh.vb[s*vbs:], y[k.base(s)+i0*k.d:], k.d, rows, k.dh)
		}
	}
}

// backward is the head's backward: dV_s for every sequence (overwritten),
// and with dr (random's R_h gradient, rows i < t written up to the
// diagonal, or up to t) or dr1 and dr2 (factorized random's, R1_h's rows
// i < t overwritten, R2_h's added to) the logits' gradients.
func (k *sharedTask) backward(dy, v, dv, dr, dr1, dr2 []float32, softBack func(t, i0, i1 int, a, g, db []float32)) {
	kn, sc, sh, n, d, dh := k.kn, k.sc, k.sh, k.n, k.d, k.dh
	grads := dr != nil || dr1 != nil
	kpG := k.b * k.kpH
	if grads {
		// V_s as B panels a key a column, the sequences' depths joined.
		pg := bf16.BPanel(kpG)
		for j0 := 0; j0 < k.t; j0 += bf16.NR {
			for s := 0; s < k.b; s++ {
				bf16.PackB(sh.vk[j0/bf16.NR*pg+s*k.kpH*bf16.NR:], v[k.base(s):], d, 1, j0, k.t, dh, k.kpH)
			}
		}
	}
	var fk int
	if dr1 != nil {
		fk = k.fact.dh
		bf16.PackBT(sc.kt, k.fact.w, fk, fk, k.t, k.kpN, 0, k.kpN, sc.tmp)
	}
	k.prepare()
	for s := 0; s < k.b; s++ {
		o := k.base(s)
		for i := 0; i < k.t; i++ {
			clear(dv[o+i*d : o+i*d+dh])
		}
	}
	bpS := bf16.BPanel(strip)
	for i0 := 0; i0 < k.t; i0 += strip {
		i1 := min(i0+strip, k.t)
		rows, keys := i1-i0, k.keys(i1)
		k.probs(i0, i1)
		p := sc.p
		// dV_s += P_Sᵀ·dY_s,S.
		kn.PackAT(sc.ta, p, n, keys, rows, strip, 0, strip, sc.tmp)
		for s := 0; s < k.b; s++ {
			o := k.base(s)
			bf16.PackBT(sc.sb, dy[o+i0*d:], d, dh, rows, strip, 0, strip, sc.tmp)
			for c := 0; c < dh; c += bf16.NR {
				kn.Tile(strip, 0, strip, sc.ta, sc.sb[c/bf16.NR*bpS:], dv[o+c:], d, keys, min(bf16.NR, dh-c), dv[o+c:], nil)
			}
		}
		if !grads {
			continue
		}
		// G_S = Σ_s dY_s,S·V_sᵀ, then dB_S.
		lda := bf16.LDA(kpG)
		for s := 0; s < k.b; s++ {
			packStrip(kn, sh.sa, lda, s*k.kpH, dy[k.base(s):], d, i0, i1, dh)
		}
		g := sc.g
		kn.TileRow(kpG, 0, kpG, sh.sa, sh.vk, g, n, rows, keys)
		if dr != nil {
			softBack(k.t, i0, i1, p, g, dr[i0*n:])
			continue
		}
		softBack(k.t, i0, i1, p, g, g)
		if k.causal { // dB is 0 above the diagonal: the products read up to key i1
			for i := i0; i < i1; i++ {
				clear(g[(i-i0)*n+i+1 : (i-i0)*n+keys])
			}
		}
		// dR1_S = dB_S·R2_h, dR2 += dB_Sᵀ·R1_S.
		packStrip(kn, sc.sa, bf16.LDA(k.kpN), 0, g, n, 0, rows, keys)
		kn.TileRow(k.kpN, 0, bf16.Pad(keys), sc.sa, sc.kt, dr1[i0*fk:], fk, rows, fk)
		kn.PackAT(sc.ta, g, n, keys, rows, strip, 0, strip, sc.tmp)
		bf16.PackBT(sc.sb, k.fact.x[i0*fk:], fk, fk, rows, strip, 0, strip, sc.tmp)
		kn.Tile(strip, 0, strip, sc.ta, sc.sb, dr2, fk, keys, fk, dr2, nil)
	}
}

// sharedJob runs the shared path's strips, a head a task.
type sharedJob struct {
	m    *Model
	ws   *Workspace
	l    int
	back bool
}

func (j *sharedJob) Run(worker, h int) {
	m, ws := j.m, j.ws
	ly, lw := &m.layers[j.l], &ws.lay[j.l]
	k := m.sharedTask(ws, j.l, h, &m.strips[worker], &m.shared[worker])
	if !j.back {
		k.forward(lw.y, lw.v)
		return
	}
	var dr, dr1, dr2 []float32
	nn, nk := m.n*m.n, m.n*m.fk
	switch {
	case ly.r1 != nil:
		dr1, dr2 = ly.r1.Grad[h*nk:h*nk+nk], ly.r2.Grad[h*nk:h*nk+nk]
	case !ly.r.Frozen:
		dr = ly.r.Grad[h*nn : h*nn+nn]
	}
	k.backward(ws.dy, lw.v, ws.dv, dr, dr1, dr2, m.Kernels.SoftmaxRowsBack)
}

// sharedStrips runs layer l's forward (back false) or backward on the
// shared path's strips.
func (m *Model) sharedStrips(ws *Workspace, l int, back bool) {
	m.sharedScratch(ws.b)
	m.jobs.shared = sharedJob{m: m, ws: ws, l: l, back: back}
	m.run(m.heads, &m.jobs.shared)
	m.jobs.shared = sharedJob{}
}

// sharedProbs writes head h's probabilities in layer l to dst, a t×t
// row-major matrix (row i's entries j ≤ i; j < t unmasked), made again as
// the forward made them, with buffers of its own.
func (m *Model) sharedProbs(ws *Workspace, l, h int, dst []float32) {
	sc := newStripBF(m.eng.BF16Kernel(), m.n, m.dh)
	k := m.sharedTask(ws, l, h, &sc, nil)
	t, n := k.t, k.n
	k.prepare()
	for i0 := 0; i0 < t; i0 += strip {
		i1 := min(i0+strip, t)
		k.probs(i0, i1)
		for i := i0; i < i1; i++ {
			copy(dst[i*t:i*t+k.keys(i+1)], sc.p[(i-i0)*n:])
		}
	}
}
