package model

// linAdd adds φ(K_j) (fk) and V_j (one row) into linear attention's
// running S and z.
func (dc *Decoder) linAdd(dl *decLayer, fk, v []float32) {
	m := dc.m
	dh := m.dh
	for h := 0; h < m.heads; h++ {
		s := dl.ls[h*dh*dh : h*dh*dh+dh*dh]
		z := dl.lz[h*dh : h*dh+dh]
		vh := v[h*dh : h*dh+dh]
		for p, f := range fk[h*dh : h*dh+dh] {
			z[p] += f
			axpy(f, vh, s[p*dh:p*dh+dh])
		}
	}
}

// linearRow is row i of linear attention into r.y.
func (dc *Decoder) linearRow(dl *decLayer, r *decRow) {
	m := dc.m
	d, dh := m.d, m.dh
	for c, x := range r.q[:d] {
		r.q[c] = elu1(x)
	}
	for c, x := range r.k[:d] {
		r.k[c] = elu1(x)
	}
	dc.linAdd(dl, r.k[:d], r.v[:d])
	for h := 0; h < m.heads; h++ {
		s := dl.ls[h*dh*dh : h*dh*dh+dh*dh]
		fq := r.q[h*dh : h*dh+dh]
		rd := 1 / (dot(fq, dl.lz[h*dh:h*dh+dh]) + 1e-6)
		y := r.y[h*dh : h*dh+dh]
		clear(y)
		for p, f := range fq {
			axpy(f, s[p*dh:p*dh+dh], y)
		}
		for c := range y {
			y[c] *= rd
		}
	}
}
