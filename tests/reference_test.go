package tests

import "math"

// The float64 references: each formula of runtime/kernels/set.go written
// out as plain sums, independent of the generated code, with the error a
// float32 kernel may make on each output.
//
// Tolerances. u = 2⁻²⁴ is float32's unit roundoff. A float32 sum of L
// products, in any order and blocking, errs by at most γ_L·Σ|terms| ≈
// L·u·Σ|terms| (Higham, Accuracy and Stability, §3.1); sumTol allows
// (2L + 16)·u·Σ|terms|, twice that plus a few roundings (scaling, bias,
// normalisation), and an absolute (L+1)·2⁻¹⁴⁰ for products that fall into
// float32's subnormal range. It is a worst-case bound, so correct kernels
// never fail it, yet it is far below what a wrong kernel produces: one
// term dropped or added off the causal triangle changes a sum by about
// Σ|terms|/L, which is L/(2L+16)/u ≈ 10⁶ times more than allowed at L ≤ 512.
// The modes with integer inputs are exact in any order (every partial sum
// is an integer below 2²⁴) and are compared with tolerance zero.

// u is float32's unit roundoff.
const u = 0x1p-24

// sumTol is the error allowed on a float32 reduction of L terms whose
// absolute values add up to mag.
func sumTol(L int, mag float64) float64 {
	return float64(2*L+16)*u*mag + float64(L+1)*0x1p-140
}

// probTol is the error allowed on a softmax probability p of a row of L
// entries whose logit is x below the row maximum: the exponential's own
// error (a few ulps; 64u allowed), the float32 rounding of x itself when a
// kernel forms b − m in float32 (|x|·u relative, twice allowed), and the
// normalising sum of L terms; plus 2⁻¹²⁵ absolute for exponentials a kernel
// flushes to zero below the normal range.
func probTol(L int, x, p float64) float64 {
	if math.IsInf(x, -1) {
		return 0x1p-125 // a masked entry: p = 0
	}
	return (float64(2*L+64)+2*math.Abs(x))*u*p + 0x1p-125
}

// exactly sets every tolerance of e to zero: for the integer modes.
func exactly(es ...*expect) {
	for _, e := range es {
		for k := range e.tol {
			e.tol[k] = 0
		}
	}
}

// refSoftmaxValue: for every row i < t, with m_i the maximum of b[i, j≤i],
//
//	a[i,j] = exp(b[i,j] − m_i) / Σ_{j'≤i} exp(b[i,j'] − m_i)
//	y[i,c] = Σ_{j≤i} a[i,j]·v[j,c]
//
// and a = 0, y = 0 on a row of b that is all −Inf. The keys of row i are
// those of b's layout: j ≤ i in the causal triangle, every j < t in the
// square of a bidirectional spec (the same for every reference below).
func refSoftmaxValue(t, dh int, b, v mat, la, ly layout) (a, y *expect) {
	a, y = newExpect("a", la), newExpect("y", ly)
	for i := 0; i < t; i++ {
		p, pt := refSoftmaxRow(a, b, i)
		for c := 0; c < dh; c++ {
			s, mag, errA := 0.0, 0.0, 0.0
			for j := range p {
				vj := float64(v.at(j, c))
				s += p[j] * vj
				mag += math.Abs(p[j] * vj)
				errA += pt[j] * math.Abs(vj)
			}
			y.set(i, c, s, errA+sumTol(len(p), mag))
		}
	}
	return a, y
}

// refSoftmaxRow sets row i of a to the softmax of row i of b over its keys
// and returns the probabilities and their tolerances; a row of b that is
// all −Inf leaves a's row 0 (newExpect's zeros, tolerance 0) and returns
// none.
func refSoftmaxRow(a *expect, b mat, i int) (p, pt []float64) {
	L := b.lay.rowLen(i)
	m := math.Inf(-1)
	for j := 0; j < L; j++ {
		m = math.Max(m, float64(b.at(i, j)))
	}
	if math.IsInf(m, -1) {
		return nil, nil
	}
	p, pt = make([]float64, L), make([]float64, L)
	sum := 0.0
	for j := range p {
		p[j] = math.Exp(float64(b.at(i, j)) - m)
		sum += p[j]
	}
	for j := range p {
		p[j] /= sum
		pt[j] = probTol(L, float64(b.at(i, j))-m, p[j])
		a.set(i, j, p[j], pt[j])
	}
	return p, pt
}

// refSoftmaxValueBack:
//
//	dv[j,c] = Σ_{j≤i<t} a[i,j]·dy[i,c]
//	db[i,j] = a[i,j]·(g[i,j] − Σ_{j'≤i} a[i,j']·g[i,j']),  g[i,j] = Σ_c dy[i,c]·v[j,c]
func refSoftmaxValueBack(t, dh int, a, v, dy mat, ldb, ldv layout) (db, dv *expect) {
	db, dv = newExpect("db", ldb), newExpect("dv", ldv)
	for j := 0; j < t; j++ {
		for c := 0; c < dh; c++ {
			s, mag := 0.0, 0.0
			i0 := a.lay.colStart(j)
			for i := i0; i < t; i++ {
				x := float64(a.at(i, j)) * float64(dy.at(i, c))
				s += x
				mag += math.Abs(x)
			}
			dv.set(j, c, s, sumTol(t-i0, mag))
		}
	}
	for i := 0; i < t; i++ {
		L := a.lay.rowLen(i)
		g := make([]float64, L)
		eg := make([]float64, L)
		for j := 0; j < L; j++ {
			mag := 0.0
			for c := 0; c < dh; c++ {
				x := float64(dy.at(i, c)) * float64(v.at(j, c))
				g[j] += x
				mag += math.Abs(x)
			}
			eg[j] = sumTol(dh, mag)
		}
		s, mag, es := 0.0, 0.0, 0.0
		for j := 0; j < L; j++ {
			aj := float64(a.at(i, j))
			s += aj * g[j]
			mag += math.Abs(aj * g[j])
			es += math.Abs(aj) * eg[j]
		}
		es += sumTol(L, mag)
		for j := 0; j < L; j++ {
			aj := float64(a.at(i, j))
			d := aj * (g[j] - s)
			db.set(i, j, d, math.Abs(aj)*(eg[j]+es+4*u*(math.Abs(g[j])+math.Abs(s)))+4*u*math.Abs(d)+0x1p-140)
		}
	}
	return db, dv
}

// refProduct: c[i,j] = scale·Σ_{p<W} x[i,p]·w[j,p] + bias[j] for j ≤ i < t
// (no bias when bias has no values).
func refProduct(t, width int, x, w mat, bias []float32, scale float32, lc layout) *expect {
	c := newExpect("c", lc)
	sc := float64(scale)
	for i := 0; i < t; i++ {
		for j := 0; j < lc.rowLen(i); j++ {
			s, mag := 0.0, 0.0
			for p := 0; p < width; p++ {
				prod := float64(x.at(i, p)) * float64(w.at(j, p))
				s += prod
				mag += math.Abs(prod)
			}
			v, m := sc*s, math.Abs(sc)*mag
			if len(bias) > 0 {
				v += float64(bias[j])
				m += math.Abs(float64(bias[j]))
			}
			c.set(i, j, v, sumTol(width+2, m))
		}
	}
	return c
}

// refProductBackX: dx[i,p] = scale·Σ_{j≤i} dc[i,j]·w[j,p].
func refProductBackX(t, width int, dc, w mat, scale float32, ldx layout) *expect {
	dx := newExpect("dx", ldx)
	sc := float64(scale)
	for i := 0; i < t; i++ {
		for p := 0; p < width; p++ {
			s, mag := 0.0, 0.0
			L := dc.lay.rowLen(i)
			for j := 0; j < L; j++ {
				prod := float64(dc.at(i, j)) * float64(w.at(j, p))
				s += prod
				mag += math.Abs(prod)
			}
			dx.set(i, p, sc*s, sumTol(L+1, math.Abs(sc)*mag))
		}
	}
	return dx
}

// refProductBackW: dw[j,p] = dw0[j,p] + scale·Σ_{j≤i<t} dc[i,j]·x[i,p] and
// dbias[j] = dbias0[j] + Σ_{j≤i<t} dc[i,j] (nil when dbias0 is nil).
func refProductBackW(t, width int, dc, x, dw0 mat, dbias0 []float32, scale float32) (dw, dbias *expect) {
	dw = newExpect("dw", dw0.lay)
	sc := float64(scale)
	for j := 0; j < t; j++ {
		for p := 0; p < width; p++ {
			s, mag := 0.0, 0.0
			i0 := dc.lay.colStart(j)
			for i := i0; i < t; i++ {
				prod := float64(dc.at(i, j)) * float64(x.at(i, p))
				s += prod
				mag += math.Abs(prod)
			}
			d0 := float64(dw0.at(j, p))
			dw.set(j, p, d0+sc*s, sumTol(t-i0+2, math.Abs(d0)+math.Abs(sc)*mag))
		}
	}
	if dbias0 == nil {
		return dw, nil
	}
	dbias = newExpect("dbias", layout{rows: 1, stride: t, width: t})
	for j := 0; j < t; j++ {
		s, mag := float64(dbias0[j]), math.Abs(float64(dbias0[j]))
		i0 := dc.lay.colStart(j)
		for i := i0; i < t; i++ {
			s += float64(dc.at(i, j))
			mag += math.Abs(float64(dc.at(i, j)))
		}
		dbias.set(0, j, s, sumTol(t-i0+2, mag))
	}
	return dw, dbias
}

// refTile: c[i,j] = fa[i, j div FB]·fb[i, j mod FB] for j ≤ i < t.
func refTile(t, fbw int, fa, fb mat, lc layout) *expect {
	c := newExpect("c", lc)
	for i := 0; i < t; i++ {
		for j := 0; j < lc.rowLen(i); j++ {
			v := float64(fa.at(i, j/fbw)) * float64(fb.at(i, j%fbw))
			c.set(i, j, v, 2*u*math.Abs(v)+0x1p-140)
		}
	}
	return c
}

// refTileBack: for i < t, p < FA, q < FB,
//
//	dfa[i,p] = Σ_{q: p·FB+q ≤ i} dc[i, p·FB+q]·fb[i,q]
//	dfb[i,q] = Σ_{p: p·FB+q ≤ i} dc[i, p·FB+q]·fa[i,p]
func refTileBack(t, faw, fbw int, dc, fa, fb mat) (dfa, dfb *expect) {
	dfa, dfb = newExpect("dfa", fa.lay), newExpect("dfb", fb.lay)
	for i := 0; i < t; i++ {
		for p := 0; p < faw; p++ {
			s, mag := 0.0, 0.0
			for q := 0; q < fbw; q++ {
				if j := p*fbw + q; j < dc.lay.rowLen(i) {
					prod := float64(dc.at(i, j)) * float64(fb.at(i, q))
					s += prod
					mag += math.Abs(prod)
				}
			}
			dfa.set(i, p, s, sumTol(fbw, mag))
		}
		for q := 0; q < fbw; q++ {
			s, mag := 0.0, 0.0
			for p := 0; p < faw; p++ {
				if j := p*fbw + q; j < dc.lay.rowLen(i) {
					prod := float64(dc.at(i, j)) * float64(fa.at(i, p))
					s += prod
					mag += math.Abs(prod)
				}
			}
			dfb.set(i, q, s, sumTol(faw, mag))
		}
	}
	return dfa, dfb
}

// refTriScale: y[i,j] = alpha·x[i,j] on the triangle.
func refTriScale(t int, alpha float32, x mat) *expect {
	y := newExpect("y", x.lay)
	for i := 0; i < t; i++ {
		for j := 0; j < x.lay.rowLen(i); j++ {
			v := float64(alpha) * float64(x.at(i, j))
			y.set(i, j, v, 2*u*math.Abs(v)+0x1p-140)
		}
	}
	return y
}

// refTriAxpy: y[i,j] = y0[i,j] + alpha·x[i,j] on the triangle.
func refTriAxpy(t int, alpha float32, x, y0 mat) *expect {
	y := newExpect("y", x.lay)
	for i := 0; i < t; i++ {
		for j := 0; j < x.lay.rowLen(i); j++ {
			ax := float64(alpha) * float64(x.at(i, j))
			y0v := float64(y0.at(i, j))
			y.set(i, j, y0v+ax, sumTol(2, math.Abs(y0v)+math.Abs(ax)))
		}
	}
	return y
}

// refTriDot: Σ_{j≤i<t} x[i,j]·y[i,j].
func refTriDot(t int, x, y mat) *expect {
	s, mag := 0.0, 0.0
	for i := 0; i < t; i++ {
		for j := 0; j < x.lay.rowLen(i); j++ {
			prod := float64(x.at(i, j)) * float64(y.at(i, j))
			s += prod
			mag += math.Abs(prod)
		}
	}
	return scalarExpect(s, sumTol(x.lay.count(), mag))
}
