package model

import "math"

// The attention of one layer runs as batch·heads tasks, task = s·heads + h
// for sequence s and head h, each on the spec's generated kernels:
// logits B (one component written straight into the kept probability
// block A, or a mixture Σ w_m B^(m) summed there from a per-worker scratch),
// then the fused softmax and value product.

type attnFwdJob struct {
	m  *Model
	ws *Workspace
	l  int
	// strips: vanilla's or dense's (alone or mixed with random) on the
	// bf16 path, a strip of rows at a time (strips_bf16.go).
	strips bool
}

// compLogits writes component c's logits for (s, h) into dst and returns
// dst, or returns R's head slice itself for random and fixed_random.
func (m *Model) compLogits(c comp, ly *layer, lw *layerWS, t, s, h int, dst []float32) []float32 {
	return m.compLogitsTimes(c, ly, lw, t, s, h, dst, 1)
}

// scalable reports whether compLogitsTimes can fold a factor into
// component c's kernel (its scale; no bias after it).
func scalable(c comp) bool { return c == compVanilla || c == compFactRandom }

// compLogitsTimes is compLogits times w, which the kernel's scale takes for
// the scalable components (w must be 1 for the others).
func (m *Model) compLogitsTimes(c comp, ly *layer, lw *layerWS, t, s, h int, dst []float32, w float32) []float32 {
	k := m.Kernels
	base := s*t*m.d + h*m.dh
	switch c {
	case compVanilla:
		k.VanillaLogits(t, lw.q[base:], lw.k[base:], nil, dst, w*float32(1/math.Sqrt(float64(m.dh))))
	case compDense:
		k.DenseLogits(t, lw.g[base:], ly.w2.w.Data, ly.w2.b.Data, dst, 1)
	case compRandom, compFixedRandom:
		return ly.r.Data[h*m.n*m.n:]
	case compFactRandom:
		nk := m.n * m.fk
		k.FactRandomLogits(t, ly.r1.Data[h*nk:], ly.r2.Data[h*nk:], nil, dst, w)
	case compFactDense:
		st := s * t * m.heads
		k.FactDenseLogits(t, lw.fa[st*m.fa+h*m.fa:], lw.fb[st*m.fb+h*m.fb:], dst)
	}
	return dst
}

func (j *attnFwdJob) Run(worker, task int) {
	m, ws := j.m, j.ws
	ly, lw := &m.layers[j.l], &ws.lay[j.l]
	k := m.Kernels
	t, nn := ws.t, m.n*m.n
	if j.strips {
		st := m.stripTask(ws, j.l, &m.strips[worker], task)
		st.forward(lw.y[st.base:], k.SoftmaxRows)
		return
	}
	s, h := task/m.heads, task%m.heads
	a := lw.a[task*nn : task*nn+nn]
	base := s*t*m.d + h*m.dh
	if len(m.comps) == 1 {
		b := m.compLogits(m.comps[0], ly, lw, t, s, h, a)
		k.SoftmaxValue(t, b, a, lw.v[base:], lw.y[base:])
		return
	}
	scr := m.scratch[worker]
	for mi, c := range m.comps {
		if mi == 0 && scalable(c) {
			// Straight into a, the weight in the kernel's scale.
			m.compLogitsTimes(c, ly, lw, t, s, h, a, lw.w[mi])
			continue
		}
		b := m.compLogits(c, ly, lw, t, s, h, scr)
		if mi == 0 {
			k.TriScale(t, lw.w[mi], b, a)
		} else {
			k.TriAxpy(t, lw.w[mi], b, a)
		}
	}
	k.SoftmaxValue(t, a, a, lw.v[base:], lw.y[base:])
}

type attnBackJob struct {
	m      *Model
	ws     *Workspace
	l      int
	strips bool // as attnFwdJob's
}

// compBack propagates dc = ∂loss/∂B^(c) (already scaled by the mixture
// weight) into the component's inputs for (s, h) = task: q and k, relu(w1·h),
// fa and fb per sequence; w2, R1 and R2 into the task's partial buffers.
// random's R is reduced over the sequences afterwards (reduceJob).
func (m *Model) compBack(c comp, ly *layer, lw *layerWS, ws *Workspace, t, task int, dc []float32) {
	k := m.Kernels
	s, h := task/m.heads, task%m.heads
	d, dh, n := m.d, m.dh, m.n
	base := s*t*d + h*dh
	switch c {
	case compVanilla:
		scale := float32(1 / math.Sqrt(float64(dh)))
		k.VanillaLogitsBackX(t, dc, lw.k[base:], ws.dq[base:], scale)
		for i := 0; i < t; i++ {
			clear(ws.dk[base+i*d : base+i*d+dh])
		}
		k.VanillaLogitsBackW(t, dc, lw.q[base:], ws.dk[base:], nil, scale)
	case compDense:
		k.DenseLogitsBackX(t, dc, ly.w2.w.Data, ws.dg[base:], 1)
		stride := n*dh + n
		p := ws.pW2[task*stride : task*stride+stride]
		clear(p[:t*dh])
		clear(p[n*dh : n*dh+t])
		k.DenseLogitsBackW(t, dc, lw.g[base:], p[:n*dh], p[n*dh:], 1)
	case compFactRandom:
		nk := n * m.fk
		p1 := ws.pR1[task*nk : task*nk+nk]
		p2 := ws.pR2[task*nk : task*nk+nk]
		k.FactRandomLogitsBackX(t, dc, ly.r2.Data[h*nk:], p1, 1)
		clear(p2[:t*m.fk])
		k.FactRandomLogitsBackW(t, dc, ly.r1.Data[h*nk:], p2, nil, 1)
	case compFactDense:
		st := s * t * m.heads
		oa, ob := st*m.fa+h*m.fa, st*m.fb+h*m.fb
		k.FactDenseLogitsBack(t, dc, lw.fa[oa:], lw.fb[ob:], ws.dfa[oa:], ws.dfb[ob:])
	}
}

func (j *attnBackJob) Run(worker, task int) {
	m, ws := j.m, j.ws
	ly, lw := &m.layers[j.l], &ws.lay[j.l]
	k := m.Kernels
	if j.strips {
		m.stripBackTask(ws, j.l, worker, task)
		return
	}
	t, nn := ws.t, m.n*m.n
	s, h := task/m.heads, task%m.heads
	a := lw.a[task*nn : task*nn+nn]
	base := s*t*m.d + h*m.dh
	// a becomes dB = ∂loss/∂B in place.
	k.SoftmaxValueBack(t, a, lw.v[base:], ws.dy[base:], a, ws.dv[base:])
	if len(m.comps) == 1 {
		m.compBack(m.comps[0], ly, lw, ws, t, task, a)
		return
	}
	scr := m.scratch[worker]
	nc := len(m.comps)
	for mi, c := range m.comps {
		if c == compVanilla {
			ws.pMix[task*nc+mi] = m.vanillaMixBack(lw, ws, t, task, a, lw.w[mi])
			continue
		}
		b := m.compLogits(c, ly, lw, t, s, h, scr)
		ws.pMix[task*nc+mi] = k.TriDot(t, a, b)
		if c == compRandom || c == compFixedRandom {
			continue
		}
		k.TriScale(t, lw.w[mi], a, scr)
		m.compBack(c, ly, lw, ws, t, task, scr)
	}
}

// vanillaMixBack is vanilla's backward in a mixture for task (s, h), from
// the mixture's dB (db) and vanilla's weight w: dq = w·X and dk = w·Y for
// X = scale·dB·K and Y = scale·dBᵀ·Q, and it returns ⟨dB, B^(vanilla)⟩ =
// ⟨X, Q⟩ (B^(vanilla) = scale·Q·Kᵀ), the mixture weight's term, which
// thus needs no second product for vanilla's logits. dk takes w in its
// kernel's scale; dq is X until the dot has read it.
func (m *Model) vanillaMixBack(lw *layerWS, ws *Workspace, t, task int, db []float32, w float32) float32 {
	k := m.Kernels
	d, dh := m.d, m.dh
	base := task/m.heads*t*d + task%m.heads*dh
	scale := float32(1 / math.Sqrt(float64(dh)))
	k.VanillaLogitsBackX(t, db, lw.k[base:], ws.dq[base:], scale)
	for i := 0; i < t; i++ {
		clear(ws.dk[base+i*d : base+i*d+dh])
	}
	k.VanillaLogitsBackW(t, db, lw.q[base:], ws.dk[base:], nil, w*scale)
	var dot float64
	for i := 0; i < t; i++ {
		o := base + i*d
		dq, q := ws.dq[o:o+dh], lw.q[o:o+dh]
		var r float32
		for c, x := range dq {
			r += x * q[c]
			dq[c] = w * x
		}
		dot += float64(r)
	}
	return float32(dot)
}

// reduceJob sums the per-task partial gradients of the parameters that are
// shared across sequences (and heads), always in task order.
type reduceJob struct {
	m  *Model
	ws *Workspace
	l  int
	op reduceOp
}

type reduceOp int

const (
	reduceR   reduceOp = iota // task = head: dR[h] += w·dB[s, h] over s
	reduceR12                 // task = head: dR1[h], dR2[h] over s
	reduceW2                  // task = block of rowBlock rows j of w2: over all (s, h)
)

func (j *reduceJob) Run(_, task int) {
	m, ws := j.m, j.ws
	ly, lw := &m.layers[j.l], &ws.lay[j.l]
	t, n, heads := ws.t, m.n, m.heads
	switch j.op {
	case reduceR:
		h := task
		w := float32(1)
		for mi, c := range m.comps {
			if c == compRandom && len(m.comps) > 1 {
				w = lw.w[mi]
			}
		}
		g := ly.r.Grad[h*n*n : h*n*n+n*n]
		for s := 0; s < ws.b; s++ {
			tk := s*heads + h
			m.Kernels.TriAxpy(t, w, lw.a[tk*n*n:tk*n*n+n*n], g)
		}
	case reduceR12:
		h := task
		nk := n * m.fk
		e := t * m.fk
		g1 := ly.r1.Grad[h*nk : h*nk+e]
		g2 := ly.r2.Grad[h*nk : h*nk+e]
		for s := 0; s < ws.b; s++ {
			tk := s*heads + h
			p1 := ws.pR1[tk*nk : tk*nk+e]
			p2 := ws.pR2[tk*nk : tk*nk+e]
			for i, v := range p1 {
				g1[i] += v
			}
			for i, v := range p2 {
				g2[i] += v
			}
		}
	case reduceW2:
		dh := m.dh
		stride := n*dh + n
		j0 := task * rowBlock
		j1 := min(j0+rowBlock, t)
		gw := ly.w2.w.Grad[j0*dh : j1*dh]
		gb := ly.w2.b.Grad[j0:j1]
		for tk := 0; tk < ws.b*heads; tk++ {
			p := ws.pW2[tk*stride : tk*stride+stride]
			pw := p[j0*dh : j1*dh]
			pb := p[n*dh+j0 : n*dh+j1]
			pw = pw[:len(gw)]
			for i, v := range pw {
				gw[i] += v
			}
			pb = pb[:len(gb)]
			for i, v := range pb {
				gb[i] += v
			}
		}
	}
}

func (m *Model) attentionForward(ws *Workspace, l int) {
	if m.kind != kindSynth {
		m.attnFreeForward(ws, l)
		return
	}
	ws.sharedP = m.bfAttention()
	if ws.sharedP {
		m.sharedStrips(ws, l, false)
		return
	}
	ws.stripsP = m.bfStrips()
	if ws.stripsP {
		m.stripScratch()
	}
	m.jobs.attnF = attnFwdJob{m: m, ws: ws, l: l, strips: ws.stripsP}
	m.run(ws.b*m.heads, &m.jobs.attnF)
	m.jobs.attnF = attnFwdJob{}
}

// attentionBackward runs the per-(sequence, head) backward and the
// reductions of the shared parameters' gradients, including the mixture's.
func (m *Model) attentionBackward(ws *Workspace, l int) {
	if m.kind != kindSynth {
		m.attnFreeBackward(ws, l)
		return
	}
	if ws.sharedP {
		m.sharedStrips(ws, l, true)
		return
	}
	if ws.stripsP {
		m.stripScratch()
	}
	m.jobs.attnB = attnBackJob{m: m, ws: ws, l: l, strips: ws.stripsP}
	m.run(ws.b*m.heads, &m.jobs.attnB)
	m.jobs.attnB = attnBackJob{}
	ly, lw := &m.layers[l], &ws.lay[l]
	if ly.r != nil && !ly.r.Frozen {
		m.reduce(ws, l, reduceR, m.heads)
	}
	if ly.r1 != nil {
		m.reduce(ws, l, reduceR12, m.heads)
	}
	if ly.w2.w != nil {
		m.reduce(ws, l, reduceW2, blocks(ws.t, rowBlock))
	}
	if ly.mix != nil {
		// ∂loss/∂w_m = Σ_tasks ⟨dB, B^(m)⟩, then through w = softmax(mix).
		nc := len(m.comps)
		gw := ws.dmixW
		clear(gw)
		for tk := 0; tk < ws.b*m.heads; tk++ {
			for mi := 0; mi < nc; mi++ {
				gw[mi] += float64(ws.pMix[tk*nc+mi])
			}
		}
		dot := 0.0
		for mi := 0; mi < nc; mi++ {
			dot += float64(lw.w[mi]) * gw[mi]
		}
		for mi := 0; mi < nc; mi++ {
			ly.mix.Grad[mi] = float32(float64(lw.w[mi]) * (gw[mi] - dot))
		}
	}
}

func (m *Model) reduce(ws *Workspace, l int, op reduceOp, tasks int) {
	m.jobs.red = reduceJob{m: m, ws: ws, l: l, op: op}
	m.run(tasks, &m.jobs.red)
	m.jobs.red = reduceJob{}
}
