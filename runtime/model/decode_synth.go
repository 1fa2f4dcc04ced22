package model

import (
	"math"
)

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
				kh := dl.kc[h*n*dh : h*n*dh+t*dh]
				if f := m.Kernels.VanillaScores; f != nil {
					f(t, q, kh, b, scale)
					break
				}
				for j := range b {
					b[j] = dot(q, kh[j*dh:j*dh+dh]) * scale
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
		y := r.y[h*dh : h*dh+dh]
		vh := dl.vc[h*n*dh : h*n*dh+t*dh]
		if f := m.Kernels.AttendDH; f != nil {
			// The softmax and y_h = p · V_h in one kernel, which
			// overwrites the logits: R's own row is copied first.
			if len(m.comps) == 1 && (m.comps[0] == compRandom || m.comps[0] == compFixedRandom) {
				copy(dc.bl[:t], acc)
				acc = dc.bl[:t]
			}
			f(t, acc, vh, y)
			continue
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
