package model

// The attention-free variants (aft_full, aft_local, aft_simple, aft_conv)
// and linear attention. Like the synthesizer family they run as
// batch·heads tasks, task = s·heads + h for sequence s and head h, each on
// the spec's generated kernels and touching only its own head slice of the
// [rows, d] activations.
//
// aft (aft_full runs as matrix products instead: aftfull.go): the kernel
// writes Z = Σ_j exp(K_j + b_ij) V_j / Σ_j exp(K_j + b_ij) with its
// statistics m and rd; then the spec's Gate kernel, over all the rows at
// once (gateJob), writes Y = σ(Q) ⊙ Z and keeps σ(Q) in place of Q.
// Backward: GateBack first, dQ = dY ⊙ Z ⊙ σ(Q)(1 − σ(Q)) and dZ = dY ⊙ σ(Q)
// (written over dY), then the kernel's dK, dV and, for aft_full/aft_local
// and aft_conv, the bias gradient into the task's own partial buffer; the
// partials are reduced in task order afterwards.
//
// linear: the task applies φ = elu + 1 to its slice of Q and K in place and
// runs the kernel. Backward: the kernel's dφ(Q), dφ(K), dV, then
// dQ = dφ(Q) · φ'(Q) with φ'(x) = 1 for x > 0 and e^x = φ(x) otherwise,
// that is min(φ(x), 1).

// attnKind is the attention a Model runs.
type attnKind int

const (
	kindSynth attnKind = iota // vanilla, the synthesizer family and mixtures
	kindAFTFull
	kindAFTLocal
	kindAFTSimple
	kindAFTConv
	kindLinear
)

// attnFreeKinds maps the attention-free and linear variants to their kinds.
var attnFreeKinds = map[string]attnKind{
	"aft_full": kindAFTFull, "aft_local": kindAFTLocal, "aft_simple": kindAFTSimple,
	"aft_conv": kindAFTConv, "linear": kindLinear,
}

// needAttnFree reports the kernels the attention-free / linear variant needs.
func (m *Model) needAttnFree(need func(ok bool, name string)) {
	k := m.Kernels
	switch m.kind {
	case kindAFTFull:
		need(k.AFTFull != nil, "AFTFull")
		need(k.AFTFullBack != nil, "AFTFullBack")
		need(k.Exp != nil, "Exp")
		need(k.AFTMax != nil, "AFTMax")
		need(k.AFTFactors != nil, "AFTFactors")
		need(k.AFTQuot != nil, "AFTQuot")
		need(k.AFTQuotBack != nil, "AFTQuotBack")
		need(k.AFTKVBack != nil, "AFTKVBack")
	case kindAFTLocal:
		need(k.AFTLocal != nil, "AFTLocal")
		need(k.AFTLocalBack != nil, "AFTLocalBack")
	case kindAFTSimple:
		need(k.AFTSimple != nil, "AFTSimple")
		need(k.AFTSimpleBack != nil, "AFTSimpleBack")
	case kindAFTConv:
		need(k.AFTConv != nil, "AFTConv")
		need(k.AFTConvBack != nil, "AFTConvBack")
	case kindLinear:
		need(k.Linear != nil, "Linear")
		need(k.LinearBack != nil, "LinearBack")
	}
	if m.kind != kindLinear {
		need(k.Gate != nil, "Gate")
		need(k.GateBack != nil, "GateBack")
	}
}

// elu1 is φ(x) = elu(x) + 1: x + 1 for x > 0, e^x otherwise.
func elu1(x float32) float32 {
	if x > 0 {
		return x + 1
	}
	return exp32(x)
}

// attnFreeJob is the per-(sequence, head) forward (back false) or backward
// of the attention-free and linear variants.
type attnFreeJob struct {
	m    *Model
	ws   *Workspace
	l    int
	back bool
}

func (j *attnFreeJob) Run(_, task int) {
	if j.back {
		j.backward(task)
	} else {
		j.forward(task)
	}
}

func (j *attnFreeJob) forward(task int) {
	m, ws := j.m, j.ws
	ly, lw := &m.layers[j.l], &ws.lay[j.l]
	k := m.Kernels
	t, d, dh := ws.t, m.d, m.dh
	s, h := task/m.heads, task%m.heads
	base := s*t*d + h*dh
	if m.kind == kindLinear {
		for i := 0; i < t; i++ {
			o := base + i*d
			q := lw.q[o : o+dh]
			kk := lw.k[o : o+dh]
			for c, x := range q {
				q[c] = elu1(x)
			}
			for c, x := range kk {
				kk[c] = elu1(x)
			}
		}
		k.Linear(t, lw.q[base:], lw.k[base:], lw.v[base:], lw.y[base:], lw.rd[s*t*m.heads+h:])
		return
	}
	kk, v, z, ms, rd := lw.k[base:], lw.v[base:], lw.z[base:], lw.ms[base:], lw.rd[base:]
	switch m.kind {
	case kindAFTFull:
		k.AFTFull(t, kk, v, ly.aw.Data, z, ms, rd)
	case kindAFTLocal:
		k.AFTLocal(t, kk, v, ly.aw.Data, z, ms, rd)
	case kindAFTSimple:
		k.AFTSimple(t, kk, v, z, ms, rd)
	case kindAFTConv:
		k.AFTConv(t, kk, v, ly.au.Data[h*m.uWidth():], z, ms, rd)
	}
}

func (j *attnFreeJob) backward(task int) {
	m, ws := j.m, j.ws
	ly, lw := &m.layers[j.l], &ws.lay[j.l]
	k := m.Kernels
	t, d, dh, n := ws.t, m.d, m.dh, m.n
	s, h := task/m.heads, task%m.heads
	base := s*t*d + h*dh
	if m.kind == kindLinear {
		k.LinearBack(t, lw.q[base:], lw.k[base:], lw.v[base:], lw.y[base:], lw.rd[s*t*m.heads+h:],
			ws.dy[base:], ws.dq[base:], ws.dk[base:], ws.dv[base:])
		for i := 0; i < t; i++ {
			o := base + i*d
			for _, pair := range [2][2][]float32{{ws.dq[o : o+dh], lw.q[o : o+dh]}, {ws.dk[o : o+dh], lw.k[o : o+dh]}} {
				g, f := pair[0], pair[1]
				f = f[:len(g)]
				for c, v := range f {
					g[c] *= min(v, 1)
				}
			}
		}
		return
	}
	// dZ is in dY: the gate's backward ran before (gateJob).
	kk, v, z, ms, rd := lw.k[base:], lw.v[base:], lw.z[base:], lw.ms[base:], lw.rd[base:]
	dz, dk, dv := ws.dy[base:], ws.dk[base:], ws.dv[base:]
	switch m.kind {
	case kindAFTFull, kindAFTLocal:
		p := ws.pW[task*n*n : task*n*n+n*n]
		clear(p[:t*n])
		if m.kind == kindAFTFull {
			k.AFTFullBack(t, kk, v, ly.aw.Data, z, ms, rd, dz, dk, dv, p)
		} else {
			k.AFTLocalBack(t, kk, v, ly.aw.Data, z, ms, rd, dz, dk, dv, p)
		}
	case kindAFTSimple:
		k.AFTSimpleBack(t, kk, v, z, ms, rd, dz, dk, dv)
	case kindAFTConv:
		sw := m.uWidth()
		p := ws.pU[task*sw : task*sw+sw]
		clear(p)
		k.AFTConvBack(t, kk, v, ly.au.Data[h*sw:], z, ms, rd, dz, dk, dv, p)
	}
}

// uWidth is the length of a head's row of aft_conv's u: the window, or
// 2·window − 1 unmasked (a window centred on the query).
func (m *Model) uWidth() int {
	if m.Spec.Bidirectional {
		return 2*m.window - 1
	}
	return m.window
}

// gateJob is the aft variants' σ(Q) gate over rowBlock rows of the [rows,
// D] activations per task, on the spec's Gate kernels: forward,
// Q ← σ(Q) and Y = σ(Q) ⊙ Z; backward (back), dQ = dY ⊙ Z ⊙ σ(Q)(1 − σ(Q))
// and dY ← dY ⊙ σ(Q), which is dZ.
type gateJob struct {
	m    *Model
	ws   *Workspace
	l    int
	back bool
}

func (j *gateJob) Run(_, task int) {
	ws, lw, d := j.ws, &j.ws.lay[j.l], j.m.d
	r0, r1 := task*rowBlock*d, min((task+1)*rowBlock, ws.rows)*d
	if j.back {
		j.m.Kernels.GateBack(r1-r0, ws.dy[r0:r1], lw.q[r0:r1], lw.z[r0:r1], ws.dq[r0:r1])
	} else {
		j.m.Kernels.Gate(r1-r0, lw.q[r0:r1], lw.z[r0:r1], lw.y[r0:r1])
	}
}

// gate runs gateJob over layer l's rows.
func (m *Model) gate(ws *Workspace, l int, back bool) {
	m.jobs.gate = gateJob{m: m, ws: ws, l: l, back: back}
	m.run(blocks(ws.rows, rowBlock), &m.jobs.gate)
	m.jobs.gate = gateJob{}
}

// attnFreeReduceJob sums the tasks' partial gradients of aft's w into its
// gradient, rowBlock rows of w per task, over the (sequence, head) tasks
// in task order.
type attnFreeReduceJob struct {
	m  *Model
	ws *Workspace
	l  int
}

func (j *attnFreeReduceJob) Run(_, task int) {
	m, ws := j.m, j.ws
	n, nn := m.n, m.n*m.n
	g := m.layers[j.l].aw.Grad
	i0 := task * rowBlock
	i1 := min(i0+rowBlock, ws.t)
	for tk := 0; tk < ws.b*m.heads; tk++ {
		p := ws.pW[tk*nn : tk*nn+nn]
		for i := i0; i < i1; i++ {
			nk := m.aftKeys(i, ws.t)
			src := p[i*n : i*n+nk]
			dst := g[i*n : i*n+nk]
			for c, v := range src {
				dst[c] += v
			}
		}
	}
}

func (m *Model) attnFreeForward(ws *Workspace, l int) {
	if m.kind == kindAFTFull && !m.aftKernels {
		m.aftFullForward(ws, l)
		return
	}
	m.jobs.free = attnFreeJob{m: m, ws: ws, l: l}
	m.run(ws.b*m.heads, &m.jobs.free)
	m.jobs.free = attnFreeJob{}
	if m.kind != kindLinear {
		m.gate(ws, l, false)
	}
}

// attnFreeBackward runs the per-(sequence, head) backward into ws.dq,
// ws.dk and ws.dv and reduces the bias parameters' partial gradients.
func (m *Model) attnFreeBackward(ws *Workspace, l int) {
	if m.kind == kindAFTFull && !m.aftKernels {
		m.aftFullBackward(ws, l)
		return
	}
	if m.kind != kindLinear {
		m.gate(ws, l, true)
	}
	m.jobs.free = attnFreeJob{m: m, ws: ws, l: l, back: true}
	m.run(ws.b*m.heads, &m.jobs.free)
	m.jobs.free = attnFreeJob{}
	ly := &m.layers[l]
	if ly.aw != nil {
		m.jobs.freeRed = attnFreeReduceJob{m: m, ws: ws, l: l}
		m.run(blocks(ws.t, rowBlock), &m.jobs.freeRed)
		m.jobs.freeRed = attnFreeReduceJob{}
	}
	if ly.au != nil {
		sw := m.uWidth()
		for s := 0; s < ws.b; s++ {
			for h := 0; h < m.heads; h++ {
				tk := s*m.heads + h
				p := ws.pU[tk*sw : tk*sw+sw]
				g := ly.au.Grad[h*sw : h*sw+sw]
				for i, v := range p {
					g[i] += v
				}
			}
		}
	}
}
