package model

import (
	"math"
)

// Task granularity of the row-wise and element-wise jobs: fixed sizes, so
// the tasks (and hence the results) do not depend on the number of workers.
const (
	rowBlock  = 16   // rows per task
	colBlock  = 16   // columns per task of the column-wise reductions
	elemBlock = 4096 // elements per task of the element-wise jobs
)

func blocks(n, size int) int { return (n + size - 1) / size }

// jobs holds one value of every job type, so that passing them to the pool
// (as pointers) never allocates.
type jobs struct {
	embed   embedJob
	ln      lnJob
	lnBack  lnBackJob
	lnGrad  lnGradJob
	ew      ewJob
	ce      ceJob
	embBack embBackJob
	attnF   attnFwdJob
	attnB   attnBackJob
	red     reduceJob
	free    attnFreeJob
	freeRed attnFreeReduceJob
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

// lnJob is the LayerNorm forward: y = (x − μ)·rs·γ + β, rs = 1/√(var + 1e-5).
type lnJob struct {
	x, y, mu, rs, gamma, beta []float32
	rows, d                   int
}

const lnEps = 1e-5

func (j *lnJob) Run(_, task int) {
	d := j.d
	gamma, beta := j.gamma[:d], j.beta[:d]
	for r := task * rowBlock; r < min((task+1)*rowBlock, j.rows); r++ {
		x := j.x[r*d : r*d+d]
		y := j.y[r*d : r*d+d]
		s := 0.0
		for _, v := range x {
			s += float64(v)
		}
		mu := float32(s / float64(d))
		q := 0.0
		for _, v := range x {
			c := float64(v - mu)
			q += c * c
		}
		rs := float32(1 / math.Sqrt(q/float64(d)+lnEps))
		j.mu[r], j.rs[r] = mu, rs
		for c, v := range x {
			y[c] = (v-mu)*rs*gamma[c] + beta[c]
		}
	}
}

func (m *Model) layerNorm(x, y, mu, rs []float32, w, b *Param, rows int) {
	m.jobs.ln = lnJob{x: x, y: y, mu: mu, rs: rs, gamma: w.Data, beta: b.Data, rows: rows, d: m.d}
	m.run(blocks(rows, rowBlock), &m.jobs.ln)
	m.jobs.ln = lnJob{}
}

// lnBackJob is the LayerNorm backward to its input, per row:
// dx (+)= rs·(g − mean(g) − x̂·mean(g·x̂)), g = dy·γ.
type lnBackJob struct {
	dy, x, mu, rs, gamma, dx []float32
	rows, d                  int
	add                      bool
}

func (j *lnBackJob) Run(_, task int) {
	d := j.d
	gamma := j.gamma[:d]
	for r := task * rowBlock; r < min((task+1)*rowBlock, j.rows); r++ {
		dy := j.dy[r*d : r*d+d]
		x := j.x[r*d : r*d+d]
		dx := j.dx[r*d : r*d+d]
		mu, rs := j.mu[r], j.rs[r]
		var sg, sgx float64
		for c, v := range x {
			xh := (v - mu) * rs
			g := dy[c] * gamma[c]
			sg += float64(g)
			sgx += float64(g * xh)
		}
		mg := float32(sg / float64(d))
		mgx := float32(sgx / float64(d))
		for c, v := range x {
			xh := (v - mu) * rs
			g := dy[c] * gamma[c]
			val := rs * (g - mg - xh*mgx)
			if j.add {
				dx[c] += val
			} else {
				dx[c] = val
			}
		}
	}
}

// lnGradJob accumulates a LayerNorm's parameter gradients over all rows in
// row order, colBlock columns per task: dγ += Σ dy·x̂, dβ += Σ dy.
type lnGradJob struct {
	dy, x, mu, rs, dgamma, dbeta []float32
	rows, d                      int
}

func (j *lnGradJob) Run(_, task int) {
	d := j.d
	c0 := task * colBlock
	c1 := min(c0+colBlock, d)
	var sg, sb [colBlock]float32
	for r := 0; r < j.rows; r++ {
		dy := j.dy[r*d+c0 : r*d+c1]
		x := j.x[r*d+c0 : r*d+c1]
		x = x[:len(dy)]
		mu, rs := j.mu[r], j.rs[r]
		for c, g := range dy {
			sg[c] += g * ((x[c] - mu) * rs)
			sb[c] += g
		}
	}
	for c := c0; c < c1; c++ {
		j.dgamma[c] += sg[c-c0]
		j.dbeta[c] += sb[c-c0]
	}
}

// layerNormBack adds (or writes, when !add) the input gradient of a
// LayerNorm into dx and accumulates its parameter gradients.
func (m *Model) layerNormBack(dy, x, mu, rs, dx []float32, w, b *Param, rows int, add bool) {
	m.jobs.lnBack = lnBackJob{dy: dy, x: x, mu: mu, rs: rs, gamma: w.Data, dx: dx, rows: rows, d: m.d, add: add}
	m.run(blocks(rows, rowBlock), &m.jobs.lnBack)
	m.jobs.lnBack = lnBackJob{}
	m.jobs.lnGrad = lnGradJob{dy: dy, x: x, mu: mu, rs: rs, dgamma: w.Grad, dbeta: b.Grad, rows: rows, d: m.d}
	m.run(blocks(m.d, colBlock), &m.jobs.lnGrad)
	m.jobs.lnGrad = lnGradJob{}
}

// Element-wise operations.
type ewOp int

const (
	ewRelu     ewOp = iota // a = max(a, 0)
	ewReluBack             // a = 0 where b ≤ 0
	ewGelu                 // b = gelu(a), a = gelu'(a)
	ewMul                  // a = a · b
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
	case ewGelu:
		geluForward(a, j.b[i0:i1])
	case ewMul:
		b := j.b[i0:i1]
		b = b[:len(a)]
		for i, v := range b {
			a[i] *= v
		}
	}
}

func (m *Model) elementwise(op ewOp, a, b []float32, n int) {
	m.jobs.ew = ewJob{op: op, a: a, b: b, n: n}
	m.run(blocks(n, elemBlock), &m.jobs.ew)
	m.jobs.ew = ewJob{}
}

// ceJob is the cross-entropy: forward (per row log Σ exp and the loss) or
// backward (dlogits = (softmax − onehot)/rows).
type ceJob struct {
	m    *Model
	ws   *Workspace
	back bool
}

func (j *ceJob) Run(_, task int) {
	ws := j.ws
	v := j.m.vocab
	inv := float32(1 / float64(ws.rows))
	for r := task * rowBlock; r < min((task+1)*rowBlock, ws.rows); r++ {
		l := ws.logits[r*v : r*v+v]
		tg := int(ws.targets[r])
		if j.back {
			lse := float32(ws.lse[r])
			dl := ws.dlogits[r*v : r*v+v]
			dl = dl[:len(l)]
			for c, x := range l {
				dl[c] = exp32(x-lse) * inv
			}
			dl[tg] -= inv
			continue
		}
		mx := float64(l[0])
		for _, x := range l {
			mx = math.Max(mx, float64(x))
		}
		s := 0.0
		for _, x := range l {
			s += math.Exp(float64(x) - mx)
		}
		lse := mx + math.Log(s)
		ws.lse[r] = lse
		ws.rowNLL[r] = lse - float64(l[tg])
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
