package model

import (
	"fmt"

	"github.com/synthgen/synthgen/runtime/mat"
)

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
				dc.put(dl.kc, row.k, i, 1)
			}
			if dl.vc != nil {
				dc.put(dl.vc, row.v, i, 1)
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
