package model

import (
	"math"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// Task granularity of the row-wise and element-wise jobs: fixed sizes, so
// the tasks (and hence the results) do not depend on the number of workers.
const (
	rowBlock  = 16   // rows per task
	colBlock  = 16   // columns per task of the column-wise reductions
	elemBlock = 4096 // elements per task of the element-wise jobs (ReLU)
)

func blocks(n, size int) int { return (n + size - 1) / size }

// jobs holds one value of every job type, so that passing them to the pool
// (as pointers) never allocates.
type jobs struct {
	embed   embedJob
	ln      lnJob
	lnBack  lnBackJob
	ew      ewJob
	gelu    geluJob
	ce      ceJob
	embBack embBackJob
	attnF   attnFwdJob
	attnB   attnBackJob
	shared  sharedJob
	red     reduceJob
	free    attnFreeJob
	aft     aftFullJob
	freeRed attnFreeReduceJob
	gate    gateJob
	zero    zeroGradJob
}

// embedJob: x[r] = tok_emb[tokens[r]] + pos_emb[r mod t].
type embedJob struct {
	m  *Model
	ws *Workspace
}

func (j *embedJob) Run(_, task int) {
	m, ws := j.m, j.ws
	d, t := m.d, ws.t
	x := ws.xs[0]
	for r := task * rowBlock; r < min((task+1)*rowBlock, ws.rows); r++ {
		tok := int(ws.tokens[r])
		e := m.tokEmb.Data[tok*d : tok*d+d]
		p := m.posEmb.Data[(r%t)*d : (r%t)*d+d]
		dst := x[r*d : r*d+d]
		p = p[:len(e)]
		dst = dst[:len(e)]
		for c := range e {
			dst[c] = e[c] + p[c]
		}
	}
}

func (m *Model) embed(ws *Workspace) {
	m.jobs.embed = embedJob{m: m, ws: ws}
	m.run(blocks(ws.rows, rowBlock), &m.jobs.embed)
	m.jobs.embed = embedJob{}
}

// lnJob is the LayerNorm forward, rowBlock rows per task through the
// LayerNorm kernel: y = (x − μ)·rs·γ + β, rs = 1/√(var + 1e-5).
type lnJob struct {
	k                         kernels.LayerNormFunc
	x, y, mu, rs, gamma, beta []float32
	rows, d                   int
}

func (j *lnJob) Run(_, task int) {
	d, r0 := j.d, task*rowBlock
	r1 := min(r0+rowBlock, j.rows)
	j.k(r1-r0, j.x[r0*d:r1*d], j.gamma, j.beta, j.y[r0*d:r1*d], j.mu[r0:r1], j.rs[r0:r1])
}

func (m *Model) layerNorm(x, y, mu, rs []float32, w, b *Param, rows int) {
	m.jobs.ln = lnJob{k: m.Kernels.LayerNorm, x: x, y: y, mu: mu, rs: rs, gamma: w.Data, beta: b.Data, rows: rows, d: m.d}
	m.run(blocks(rows, rowBlock), &m.jobs.ln)
	m.jobs.ln = lnJob{}
}

// lnBackJob is a LayerNorm's backward. Task 0 accumulates the parameter
// gradients dγ += Σ dy·x̂, dβ += Σ dy over all rows in one LayerNormGrad
// call (so they do not depend on the number of workers), while tasks 1…
// add (or write, when !add) the input gradient of rowBlock rows each:
// dx (+)= rs·(g − mean(g) − x̂·mean(g·x̂)), g = dy·γ. As the tasks run
// concurrently, dx must not overlap dy or x.
type lnBackJob struct {
	back                 kernels.LayerNormBackFunc
	grad                 kernels.LayerNormGradFunc
	dy, x, mu, rs, dx    []float32
	gamma, dgamma, dbeta []float32
	rows, d              int
	add                  bool
}

func (j *lnBackJob) Run(_, task int) {
	d := j.d
	if task == 0 {
		j.grad(j.rows, j.dy[:j.rows*d], j.x[:j.rows*d], j.mu[:j.rows], j.rs[:j.rows], j.dgamma, j.dbeta)
		return
	}
	r0 := (task - 1) * rowBlock
	r1 := min(r0+rowBlock, j.rows)
	dx := j.dx[r0*d : r1*d]
	if !j.add {
		clear(dx)
	}
	j.back(r1-r0, j.dy[r0*d:r1*d], j.x[r0*d:r1*d], j.mu[r0:r1], j.rs[r0:r1], j.gamma, dx)
}

// layerNormBack adds (or writes, when !add) the input gradient of a
// LayerNorm into dx and accumulates its parameter gradients.
func (m *Model) layerNormBack(dy, x, mu, rs, dx []float32, w, b *Param, rows int, add bool) {
	k := m.Kernels
	m.jobs.lnBack = lnBackJob{back: k.LayerNormBack, grad: k.LayerNormGrad, dy: dy, x: x, mu: mu, rs: rs, dx: dx,
		gamma: w.Data, dgamma: w.Grad, dbeta: b.Grad, rows: rows, d: m.d, add: add}
	m.run(1+blocks(rows, rowBlock), &m.jobs.lnBack)
	m.jobs.lnBack = lnBackJob{}
}

// Element-wise operations.
type ewOp int

const (
	ewRelu     ewOp = iota // a = max(a, 0)
	ewReluBack             // a = 0 where b ≤ 0
)

type ewJob struct {
	op   ewOp
	a, b []float32
	n    int
}

func (j *ewJob) Run(_, task int) {
	i0 := task * elemBlock
	i1 := min(i0+elemBlock, j.n)
	a := j.a[i0:i1]
	switch j.op {
	case ewRelu:
		for i, v := range a {
			if !(v > 0) {
				a[i] = 0
			}
		}
	case ewReluBack:
		b := j.b[i0:i1]
		b = b[:len(a)]
		for i, v := range b {
			if !(v > 0) {
				a[i] = 0
			}
		}
	}
}

func (m *Model) elementwise(op ewOp, a, b []float32, n int) {
	m.jobs.ew = ewJob{op: op, a: a, b: b, n: n}
	m.run(blocks(n, elemBlock), &m.jobs.ew)
	m.jobs.ew = ewJob{}
}

// geluJob runs the GELU kernels on the [rows, ffn] matrices a and b,
// rowBlock rows per task: the forward (b = gelu(a), a = gelu'(a)) or,
// with back, the backward's product a = a·b.
type geluJob struct {
	fwd       kernels.GeluFunc
	back      kernels.GeluBackFunc
	a, b      []float32
	rows, ffn int
}

func (j *geluJob) Run(_, task int) {
	r0 := task * rowBlock
	j.Rows(r0, min(r0+rowBlock, j.rows))
}

// Rows runs the job's kernel on rows r0 ≤ r < r1 (mat.Rows: as the epilogue
// of the product that wrote them).
func (j *geluJob) Rows(r0, r1 int) {
	a, b := j.a[r0*j.ffn:r1*j.ffn], j.b[r0*j.ffn:r1*j.ffn]
	if j.back != nil {
		j.back(r1-r0, a, b)
	} else {
		j.fwd(r1-r0, a, b)
	}
}

// fc1Gelu computes fc1's output u = h·w1ᵀ + b1 [rows, ffn], then writes
// gelu(u) into g and replaces u by gelu'(u), each block of rows right after
// the product wrote it (while it is in the worker's caches).
func (m *Model) fc1Gelu(u, g, h, w, b []float32, rows int) {
	m.jobs.gelu = geluJob{fwd: m.Kernels.Gelu, a: u, b: g, rows: rows, ffn: m.ffn}
	m.eng.LinearThen(u, h, w, b, rows, m.d, m.ffn, &m.jobs.gelu)
	m.jobs.gelu = geluJob{}
}

// fc2BackGelu computes fc2's input gradient dg = dx·w2 [rows, ffn] and
// multiplies it by the derivative gd that fc1Gelu left, each block of rows
// right after the product wrote it: dg becomes the gradient at fc1's output.
func (m *Model) fc2BackGelu(dg, gd, dx, w []float32, rows int) {
	m.jobs.gelu = geluJob{back: m.Kernels.GeluBack, a: dg, b: gd, rows: rows, ffn: m.ffn}
	m.eng.LinearBackXThen(dg, dx, w, rows, m.ffn, m.d, false, &m.jobs.gelu)
	m.jobs.gelu = geluJob{}
}

// ceJob is the cross-entropy, rowBlock rows per task through the
// SoftmaxStats and SoftmaxScale kernels: forward, per row lse = mx + log s
// (in float64) and the loss lse − logit[target]; backward, dlogits =
// (softmax − onehot)/rows.
type ceJob struct {
	m    *Model
	ws   *Workspace
	back bool
}

func (j *ceJob) Run(_, task int) {
	ws, k := j.ws, j.m.Kernels
	v := j.m.vocab
	r0 := task * rowBlock
	r1 := min(r0+rowBlock, ws.rows)
	logits := ws.logits[r0*v : r1*v]
	if j.back {
		inv := float32(1 / float64(ws.rows))
		dl := ws.dlogits[r0*v : r1*v]
		k.SoftmaxScale(r1-r0, logits, ws.lse[r0:r1], dl, inv)
		for r := r0; r < r1; r++ {
			dl[(r-r0)*v+int(ws.targets[r])] -= inv
		}
		return
	}
	mx, sum := ws.ceMax[r0:r1], ws.ceSum[r0:r1]
	k.SoftmaxStats(r1-r0, logits, mx, sum)
	for r := r0; r < r1; r++ {
		lse := float64(mx[r-r0]) + math.Log(float64(sum[r-r0]))
		ws.lse[r] = float32(lse)
		ws.rowNLL[r] = lse - float64(logits[(r-r0)*v+int(ws.targets[r])])
	}
}

func (m *Model) crossEntropy(ws *Workspace, back bool) {
	m.jobs.ce = ceJob{m: m, ws: ws, back: back}
	m.run(blocks(ws.rows, rowBlock), &m.jobs.ce)
	m.jobs.ce = ceJob{}
}

// embBackJob adds the residual stream's gradient at the input into the
// embeddings' gradients: tok_emb by column blocks over all rows in row
// order, then pos_emb by row blocks of positions over the sequences in order.
type embBackJob struct {
	m   *Model
	ws  *Workspace
	pos bool
}

func (j *embBackJob) Run(_, task int) {
	m, ws := j.m, j.ws
	d := m.d
	if !j.pos {
		c0 := task * colBlock
		c1 := min(c0+colBlock, d)
		g := m.tokEmb.Grad
		for r := 0; r < ws.rows; r++ {
			tok := int(ws.tokens[r])
			src := ws.dx[r*d+c0 : r*d+c1]
			dst := g[tok*d+c0 : tok*d+c1]
			dst = dst[:len(src)]
			for c, v := range src {
				dst[c] += v
			}
		}
		return
	}
	t := ws.t
	g := m.posEmb.Grad
	for i := task * rowBlock; i < min((task+1)*rowBlock, t); i++ {
		dst := g[i*d : i*d+d]
		for b := 0; b < ws.b; b++ {
			src := ws.dx[(b*t+i)*d : (b*t+i)*d+d]
			src = src[:len(dst)]
			for c, v := range src {
				dst[c] += v
			}
		}
	}
}

func (m *Model) embedBack(ws *Workspace) {
	m.jobs.embBack = embBackJob{m: m, ws: ws}
	m.run(blocks(m.d, colBlock), &m.jobs.embBack)
	m.jobs.embBack = embBackJob{m: m, ws: ws, pos: true}
	m.run(blocks(ws.t, rowBlock), &m.jobs.embBack)
	m.jobs.embBack = embBackJob{}
}

// zeroChunk is the most gradient floats one zeroGradJob task clears.
const zeroChunk = 1 << 16

// zeroGradJob clears every parameter's gradient, chunk by chunk over the
// model's workers (task k is the k-th chunk of zeroChunk floats in
// parameter order): at the long specs the gradients are hundreds of
// megabytes a step, which one core clears at half the pace two do. When
// the attention runs on the shared bf16 path (t > 0), it leaves alone
// what Backward overwrites there: R's rows i < t, columns j ≤ i (j < t for
// a bidirectional spec), which SoftmaxRowsBack writes (at long2048_random
// half of R's 268 MB of gradients a step).
type zeroGradJob struct {
	m *Model
	t int // the rows of R's gradient Backward overwrites (0: none)
}

func (j *zeroGradJob) Run(_, task int) {
	for _, p := range j.m.Params {
		n := (len(p.Grad) + zeroChunk - 1) / zeroChunk
		if task < n {
			j.clear(p, task*zeroChunk, min((task+1)*zeroChunk, len(p.Grad)))
			return
		}
		task -= n
	}
}

// clear clears the elements [lo, hi) of p's gradient that Backward does
// not overwrite.
func (j *zeroGradJob) clear(p *Param, lo, hi int) {
	if j.t == 0 || !j.m.isR(p) {
		clear(p.Grad[lo:hi])
		return
	}
	n, causal := j.m.n, j.m.Spec.Causal() // R is a stack of n×n matrices
	for r0 := lo - lo%n; r0 < hi; r0 += n {
		c0 := zeroFrom(r0/n%n, n, j.t, causal)
		if a, b := max(lo, r0+c0), min(hi, r0+n); a < b {
			clear(p.Grad[a:b])
		}
	}
}

// zeroFrom is the first column of row i of an n×n block of R's gradient
// that zeroGradJob clears on the shared bf16 path, SoftmaxRowsBack having
// written rows i < t up to the diagonal (causal) or up to t.
func zeroFrom(i, n, t int, causal bool) int {
	switch {
	case i >= t:
		return 0
	case causal:
		return i + 1
	}
	return t
}

// isR reports whether p is a layer's trained R.
func (m *Model) isR(p *Param) bool {
	for l := range m.layers {
		if m.layers[l].r == p {
			return true
		}
	}
	return false
}

// zeroGrads clears every parameter's gradient on the model's workers (but
// the parts zeroGradJob leaves alone), before Backward on ws.
func (m *Model) zeroGrads(ws *Workspace) {
	tasks := 0
	for _, p := range m.Params {
		tasks += (len(p.Grad) + zeroChunk - 1) / zeroChunk
	}
	m.jobs.zero = zeroGradJob{m: m}
	if ws.sharedP {
		m.jobs.zero.t = ws.t // sharedBackwardBF16 writes R's rows i < t
	}
	m.run(tasks, &m.jobs.zero)
	m.jobs.zero = zeroGradJob{}
}
