package model

import (
	"math"
)

// aftAdd adds the key k and value v (one row) into the running sums of
// the keys without bias.
func (dc *Decoder) aftAdd(dl *decLayer, k, v []float32) {
	am, den, num := dl.am, dl.aden, dl.anum
	for c, kc := range k[:len(am)] {
		if kc > am[c] {
			s := exp32(am[c] - kc) // 0 for the first key (−Inf)
			den[c] = den[c]*s + 1
			num[c] = num[c]*s + v[c]
			am[c] = kc
		} else {
			e := exp32(kc - am[c])
			den[c] += e
			num[c] += e * v[c]
		}
	}
	dl.n0++
}

// aftRow is row i of the aft variants into r.y: Z from the running sums
// (keys < i+1−win) and the keys since under their biases, then the gate.
func (dc *Decoder) aftRow(ly *layer, dl *decLayer, i int, r *decRow) {
	m := dc.m
	d, n := m.d, m.n
	if m.kind == kindAFTFull {
		dc.aftFullRow(ly, dl, i, r)
		return
	}
	j0 := 0 // first key read under its bias
	switch m.kind {
	case kindAFTSimple:
		dc.aftAdd(dl, r.k[:d], r.v[:d])
		j0 = i + 1
	case kindAFTLocal, kindAFTConv:
		for dl.n0 < i+1-m.window {
			j := dl.n0
			dc.aftAdd(dl, dl.kc[j*d:j*d+d], dl.vc[j*d:j*d+d])
		}
		j0 = dl.n0
	}
	bias := func(j, h int) float32 {
		switch m.kind {
		case kindAFTConv:
			return ly.au.Data[h*m.window+i-j]
		case kindAFTFull, kindAFTLocal:
			return ly.aw.Data[i*n+j]
		}
		return 0
	}
	mx, den, num := dc.mx[:d], dc.den[:d], dc.num[:d]
	if dl.am != nil {
		copy(mx, dl.am)
	} else {
		for c := range mx {
			mx[c] = float32(math.Inf(-1))
		}
	}
	dh := m.dh
	for j := j0; j <= i; j++ {
		kr := dl.kc[j*d : j*d+d]
		for h := 0; h < m.heads; h++ {
			b := bias(j, h)
			for c := h * dh; c < h*dh+dh; c++ {
				mx[c] = max(mx[c], kr[c]+b)
			}
		}
	}
	if dl.am != nil && dl.n0 > 0 {
		for c := range den {
			s := exp32(dl.am[c] - mx[c])
			den[c] = dl.aden[c] * s
			num[c] = dl.anum[c] * s
		}
	} else {
		clear(den)
		clear(num)
	}
	e := dc.z[:d]
	for j := j0; j <= i; j++ {
		kr, vr := dl.kc[j*d:j*d+d], dl.vc[j*d:j*d+d]
		for h := 0; h < m.heads; h++ {
			b := bias(j, h)
			for c := h * dh; c < h*dh+dh; c++ {
				e[c] = kr[c] + b - mx[c]
			}
		}
		dc.exp(e)
		for c, w := range e {
			den[c] += w
			num[c] += w * vr[c]
		}
	}
	for c := range e {
		e[c] = num[c] / den[c]
	}
	m.Kernels.Gate(d, r.q[:d], e, r.y[:d]) // q ← σ(q), y = σ(q)·z
}

// aftFullRow is row i of aft_full into r.y, factorised as in aftfull.go:
// exp(K_jc + w_ij) = exp(w_ij − M_i) · exp(K_jc − κ_c) · exp(M_i + κ_c),
// the last factor cancelling between numerator and denominator, so that
//
//	[num | den] = Ew · X,  Ew_j = exp(w_ij − M_i),  M_i = max_{j≤i} w_ij
//
// is one [1, i+1] × [i+1, 2D] product over the cached factors X_j, and i+1
// exponentials: the spec's AttendKV kernel computes both, dividing the
// row by S = Σ_j Ew_j (which the quotient does not see; it returns S for
// the underflow test), or, without it, Exp and the matrix engine. κ_c is the largest key of channel c so far: a new key
// above it rescales the channel's column of X by exp(κ_old − κ_new) (a new
// maximum is rare after the first positions) so that every factor stays
// ≤ 1. A denominator below aftTiny means the row's largest term may have
// underflowed in that scale: such a channel is computed directly with its
// own maximum, as Forward's aftExact does.
func (dc *Decoder) aftFullRow(ly *layer, dl *decLayer, i int, r *decRow) {
	m := dc.m
	k := m.Kernels
	d, n, t := m.d, m.n, i+1
	kn, vn := r.k[:d], r.v[:d]
	for c, x := range kn {
		if x > dl.kappa[c] || i == 0 {
			if i > 0 {
				s := exp32(dl.kappa[c] - x)
				for j := 0; j < i; j++ {
					dl.ax[j*2*d+c] *= s
					dl.ax[j*2*d+d+c] *= s
				}
			}
			dl.kappa[c] = x
		}
	}
	xi := dl.ax[i*2*d : t*2*d]
	k.AFTFactors(d, kn, dl.kappa, vn, xi[:d], xi[d:])
	ew := dc.bl[:t]
	wr := ly.aw.Data[i*n : i*n+t]
	nd := dc.acc[:2*d]
	x := dl.ax[:t*2*d]
	// s: nd holds [num | den]/s (1 without the kernel), the quotient the
	// same; the underflow test is on den itself.
	s := float32(1)
	if f := k.AttendKV; f != nil {
		copy(ew, wr)
		s = f(t, ew, x, nd)
	} else {
		mx := wr[0]
		for _, v := range wr {
			mx = max(mx, v)
		}
		for j, v := range wr {
			ew[j] = v - mx
		}
		dc.exp(ew)
		if dc.mk {
			dc.backX(nd, ew, x, 2*d, t)
		} else {
			clear(nd)
			for j, w := range ew {
				axpy(w, x[j*2*d:(j+1)*2*d], nd)
			}
		}
	}
	z := dc.z[:d]
	for c := range z {
		if den := nd[d+c]; den*s >= aftTiny {
			z[c] = nd[c] / den
			continue
		}
		// Directly, with the (i, c)'s own maximum.
		best := float32(math.Inf(-1))
		for j, b := range wr {
			best = max(best, dl.kc[j*d+c]+b)
		}
		var sum, num float32
		for j, b := range wr {
			e := exp32(dl.kc[j*d+c] + b - best)
			sum += e
			num += e * dl.vc[j*d+c]
		}
		z[c] = num / sum
	}
	k.Gate(d, r.q[:d], z, r.y[:d]) // q ← σ(q), y = σ(q)·z
}
