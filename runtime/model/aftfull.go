package model

import (
	"math"

	"github.com/synthgen/synthgen/runtime/mat"
)

// aft_full as matrix products. Its weights exp(K_jc + w_ij) factor into
// exp(w_ij − M_i) · exp(K_jc − κ_c), with M_i = max_{j≤i} w_ij (the row's
// largest bias) and κ_c the largest key of channel c in the sequence; the
// shift exp(M_i + κ_c) cancels between numerator and denominator, so
//
//	[num | den] = Ew · [Ek ⊙ V | Ek],  Ew_ij = exp(w_ij − M_i) (j ≤ i, else 0),  Ek = exp(K − κ)
//	Z = num / den
//
// is one product per layer for the whole batch (Ew is shared by every
// sequence and channel: X = [Ek ⊙ V | Ek] holds the sequences side by side,
// [t, batch·2d]), at O(t²·d) multiply-adds and O(t² + t·d) exponentials
// instead of one exponential per (i, j, channel) as the per-row-stabilised
// kernels (AFTFull) take; the exponentials are the spec's Exp kernel's,
// a vector at a time. The backward is two more products:
//
//	D = [dZ / den | −dZ ⊙ Z / den],  G = Ewᵀ · D,  dV = Ek ⊙ G₁,  dK = Ek ⊙ (V ⊙ G₁ + G₂)
//	dw_ij = Ew_ij · Σ_col D_i,col · X_j,col   (j ≤ i; summed over the batch by the product)
//
// Ew is stored in row blocks of aftBlock rows, block rows i0 ≤ i < i1 over
// the keys j < i1 only, so the causal products skip most of the zero
// triangle. Unmasked (a bidirectional spec) every row sees every key
// j < t: Ew_ij = exp(w_ij − M_i) with M_i = max_{j<t} w_ij, the blocks'
// rows are t wide and dw is the whole [t, t] block. X (forward) and Xᵀ (dEw) are packed once per layer for all the
// blocks (mat.Panels) rather than once per block, which lets the blocks be
// small: at 64 rows the products compute 1.125 times the causal triangle's
// multiply-adds at t 512 rather than 1.5 times at 256 rows.
//
// The factorisation is exact in real arithmetic; in float32 a weight whose
// factors both stay above e^−87 is computed to a few ulp. A denominator
// below aftTiny (2^−60) means the row's largest term was below e^−41 in
// the shifted scale, where underflowed factors may matter: such an (i, c)
// is computed directly, with its own maximum (aftExact), forward and
// backward. Above it, every term whose factors could underflow is below
// e^−87 against a sum above e^−41.6, a relative 1e−19: nothing lost. The
// results depend on the products' blocking only, not on the number of
// workers.
//
// With a bf16 kernel (SetBF16) the three products run on it (mat's
// MulPanels and AccumulateTN): Ew, X and D rounded to bf16 (2⁻⁹
// relative), sums in float32. bf16 has float32's exponents: rounding
// flushes values below 2⁻¹²⁶ (e^−87.3) to 0, as the AMX and AVX512-BF16
// kernels flush such partial sums, so what is lost is again below e^−87
// per term, and the argument above holds. A den that rounding takes below
// aftTiny (or to 0) takes the direct path: phase Z, phase D and the
// backward's serial pass all test the stored den, so forward and
// backward choose alike.

// aftBlock is the row block of the factorised aft_full products.
const aftBlock = 64

// aftTiny is the denominator under which an (i, c) is computed directly.
const aftTiny = 0x1p-60

// aftBlockOf returns row block b's rows [i0, i1) (i1 ≤ t), the width w of
// its rows in the blocked Ew (the keys they see: i1 causal, t unmasked)
// and their offset.
func aftBlockOf(b, t int, bi bool) (i0, i1, w, off int) {
	i0 = b * aftBlock
	i1 = min(i0+aftBlock, t)
	if bi {
		return i0, i1, t, i0 * t
	}
	// Σ over earlier blocks b' of aftBlock · (b'+1)·aftBlock.
	off = aftBlock * aftBlock * b * (b + 1) / 2
	return i0, i1, i1, off
}

// aftEwSize is the size of the blocked Ew for t rows.
func aftEwSize(t int, bi bool) int {
	size := 0
	for b := 0; b*aftBlock < t; b++ {
		i0, i1, w, off := aftBlockOf(b, t, bi)
		size = off + (i1-i0)*w
	}
	return size
}

// aftKeys is the number of keys row i sees: i + 1 causal, t unmasked.
func (m *Model) aftKeys(i, t int) int {
	if m.Spec.Bidirectional {
		return t
	}
	return i + 1
}

// aftFullJob is one phase of the factorised aft_full forward or backward;
// tasks are row ranges of Ew (phase ew, dw) or sequences (the others).
type aftFullJob struct {
	m     *Model
	ws    *Workspace
	l     int
	phase int
	b     int // row block (phase dw)
}

const (
	aftPhaseEw = iota // Ew's rows (tasks: rowBlock rows)
	aftPhaseX         // a sequence's X = [Ek ⊙ V | Ek] (AFTFactors)
	aftPhaseZ         // a sequence's Z, then Gate's Y = σ(Q) ⊙ Z, σ(Q) over Q
	aftPhaseD         // a sequence's dQ and dZ over dY (GateBack), then D (AFTQuotBack)
	aftPhaseKV        // a sequence's dK, dV (AFTKVBack)
	aftPhaseDw        // dw of block b's rows (tasks: rowBlock rows)
)

func (j *aftFullJob) Run(_, task int) {
	m, ws := j.m, j.ws
	ly, lw := &m.layers[j.l], &ws.lay[j.l]
	t, d, n := ws.t, m.d, m.n
	nx := ws.b * 2 * d // X's row length
	switch j.phase {
	case aftPhaseEw:
		w := ly.aw.Data
		for i := task * rowBlock; i < min(t, (task+1)*rowBlock); i++ {
			i0, _, bw, off := aftBlockOf(i/aftBlock, t, m.Spec.Bidirectional)
			row := lw.ew[off+(i-i0)*bw : off+(i-i0+1)*bw]
			nk := m.aftKeys(i, t)
			wr := w[i*n : i*n+nk]
			mx := wr[0]
			for _, v := range wr {
				mx = max(mx, v)
			}
			for jj, v := range wr {
				row[jj] = v - mx
			}
			m.Kernels.Exp(nk, row)
			clear(row[nk:])
		}
	case aftPhaseX:
		s := task
		k, v := lw.k[s*t*d:(s+1)*t*d], lw.v[s*t*d:(s+1)*t*d]
		kappa := ws.aKappa[s*d : s*d+d]
		m.aftKappa(kappa, k, t)
		for i := 0; i < t; i++ {
			x := lw.x[i*nx+s*2*d : i*nx+(s+1)*2*d]
			m.Kernels.AFTFactors(d, k[i*d:i*d+d], kappa, v[i*d:i*d+d], x[:d], x[d:2*d])
		}
	case aftPhaseZ:
		s := task
		tiny := false
		for i := 0; i < t; i++ {
			r := (s*t + i) * d
			nd := lw.nd[i*nx+s*2*d : i*nx+(s+1)*2*d]
			num, den, z := nd[:d], nd[d:2*d], lw.z[r:r+d]
			m.Kernels.AFTQuot(d, num, den, z)
			if !anyTiny(den) {
				continue
			}
			for c, dc := range den {
				if !(dc >= aftTiny) { // below aftTiny, or NaN
					z[c] = m.aftExact(ws, j.l, s, i, c, 0)
				}
			}
			tiny = true
		}
		ws.aTiny[j.l*ws.b+s] = tiny
		// Y = σ(Q) ⊙ Z, σ(Q) over Q, for the whole sequence.
		r0, r1 := s*t*d, (s+1)*t*d
		m.Kernels.Gate(t*d, lw.q[r0:r1], lw.z[r0:r1], lw.y[r0:r1])
	case aftPhaseD:
		s := task
		// dQ, and dZ over dY, for the whole sequence.
		r0, r1 := s*t*d, (s+1)*t*d
		m.Kernels.GateBack(t*d, ws.dy[r0:r1], lw.q[r0:r1], lw.z[r0:r1], ws.dq[r0:r1])
		tiny := ws.aTiny[j.l*ws.b+s]
		for i := 0; i < t; i++ {
			r := (s*t + i) * d
			den := lw.nd[i*nx+s*2*d+d : i*nx+(s+1)*2*d]
			dd := ws.aD[i*nx+s*2*d : i*nx+(s+1)*2*d]
			dz, z := ws.dy[r:r+d], lw.z[r:r+d]
			m.Kernels.AFTQuotBack(d, dz, z, den, dd[:d], dd[d:2*d])
			if !tiny {
				continue
			}
			// The sequence has directly computed (i, c) (phase Z): their
			// gradient is aftExact's, the serial pass after the products,
			// so D leaves them out (the kernel's quotient by a tiny or zero
			// den is no use).
			for c, dc := range den {
				if dc < aftTiny {
					dd[c], dd[d+c] = 0, 0
				}
			}
		}
	case aftPhaseKV:
		s := task
		for jj := 0; jj < t; jj++ {
			r := (s*t + jj) * d
			x := lw.x[jj*nx+s*2*d : jj*nx+(s+1)*2*d]
			g := ws.aG[jj*nx+s*2*d : jj*nx+(s+1)*2*d]
			m.Kernels.AFTKVBack(d, x[d:2*d], lw.v[r:r+d], g[:d], g[d:2*d], ws.dk[r:r+d], ws.dv[r:r+d])
		}
	case aftPhaseDw:
		i0, i1, bw, off := aftBlockOf(j.b, t, m.Spec.Bidirectional)
		dw := ly.aw.Grad
		for i := i0 + task*rowBlock; i < min(i1, i0+(task+1)*rowBlock); i++ {
			nk := m.aftKeys(i, t)
			ew := lw.ew[off+(i-i0)*bw : off+(i-i0)*bw+nk]
			de := ws.aDEw[(i-i0)*bw : (i-i0)*bw+nk]
			g := dw[i*n : i*n+nk]
			for jj, e := range ew {
				g[jj] += e * de[jj]
			}
		}
	}
}

// aftKappa sets kappa [d] to the running maximum of k's t rows [t, d] (the
// AFTMax kernel's: a NaN key gives way to a later one).
func (m *Model) aftKappa(kappa, k []float32, t int) {
	d := m.d
	copy(kappa, k[:d])
	for i := 1; i < t; i++ {
		m.Kernels.AFTMax(d, k[i*d:i*d+d], kappa)
	}
}

// anyTiny reports whether a den is below aftTiny (or NaN): a (sequence,
// row) whose Z needs aftExact somewhere.
func anyTiny(den []float32) bool {
	for _, x := range den {
		if !(x >= aftTiny) {
			return true
		}
	}
	return false
}

// aftExact is Z[s, i, c] computed directly, stabilised by its own maximum
// m = max_j (K_jc + w_ij) over the keys row i sees: for the (i, c) whose factorised denominator
// is below aftTiny. With dz ≠ 0 it also adds the (i, c)'s part of the
// gradients: dV_jc += p_j·dz, dK_jc += p_j·dz·(V_jc − Z), dw_ij += the same,
// with p_j = exp(K_jc + w_ij − m) / Σ.
func (m *Model) aftExact(ws *Workspace, l, s, i, c int, dz float32) float32 {
	ly, lw := &m.layers[l], &ws.lay[l]
	t, d, n := ws.t, m.d, m.n
	k, v := lw.k[s*t*d:], lw.v[s*t*d:]
	w := ly.aw.Data[i*n : i*n+m.aftKeys(i, t)]
	mx := float32(math.Inf(-1))
	for jj, b := range w {
		mx = max(mx, k[jj*d+c]+b)
	}
	var sum, num float32
	for jj, b := range w {
		e := exp32(k[jj*d+c] + b - mx)
		sum += e
		num += e * v[jj*d+c]
	}
	z := num / sum
	if dz == 0 {
		return z
	}
	dk, dv := ws.dk[s*t*d:], ws.dv[s*t*d:]
	dw := ly.aw.Grad[i*n : i*n+len(w)]
	for jj, b := range w {
		p := exp32(k[jj*d+c]+b-mx) / sum
		g := p * dz * (v[jj*d+c] - z)
		dv[jj*d+c] += p * dz
		dk[jj*d+c] += g
		dw[jj] += g
	}
	return z
}

// aftFullForward is the factorised aft_full forward of layer l.
func (m *Model) aftFullForward(ws *Workspace, l int) {
	lw := &ws.lay[l]
	t, nx := ws.t, ws.b*2*m.d
	j := &m.jobs.aft
	*j = aftFullJob{m: m, ws: ws, l: l, phase: aftPhaseEw}
	m.run(blocks(t, rowBlock), j)
	j.phase = aftPhaseX
	m.run(ws.b, j)
	// X packed once for every block, which reads its rows < i1.
	m.eng.PackB(&ws.aX, lw.x[:t*nx], nx, t, false)
	for b := 0; b*aftBlock < t; b++ {
		i0, i1, bw, off := aftBlockOf(b, t, m.Spec.Bidirectional)
		// [num | den] rows i0…i1−1 = Ew rows (over keys < bw) · X rows < bw.
		m.eng.MulPanels(lw.nd[i0*nx:i1*nx], lw.ew[off:off+(i1-i0)*bw], &ws.aX, i1-i0, nx, bw, false)
	}
	j.phase = aftPhaseZ
	m.run(ws.b, j)
	*j = aftFullJob{}
}

// aftFullBackward is the factorised aft_full backward of layer l: dQ, dK,
// dV into ws.dq, ws.dk, ws.dv (dY becomes dZ) and w's gradient added.
func (m *Model) aftFullBackward(ws *Workspace, l int) {
	lw := &ws.lay[l]
	t, d, nx := ws.t, m.d, ws.b*2*m.d
	j := &m.jobs.aft
	*j = aftFullJob{m: m, ws: ws, l: l, phase: aftPhaseD}
	m.run(ws.b, j)
	// G = Ewᵀ · D, the row blocks' products added in order (a fixed order
	// of additions), each block of G taking all of them while it is in
	// cache (the products one after another would each read and write all
	// of G's rows before their block's end).
	clear(ws.aG[:t*nx])
	terms := ws.aTerms[:0]
	for b := 0; b*aftBlock < t; b++ {
		i0, i1, bw, off := aftBlockOf(b, t, m.Spec.Bidirectional)
		terms = append(terms, mat.TNTerm{A: lw.ew[off : off+(i1-i0)*bw], B: ws.aD[i0*nx : i1*nx],
			LDA: bw, LDB: nx, M: bw, K: i1 - i0})
	}
	m.eng.AccumulateTN(ws.aG[:t*nx], t, nx, terms)
	clear(terms) // no slices of this step's buffers kept
	j.phase = aftPhaseKV
	m.run(ws.b, j)
	m.eng.PackB(&ws.aX, lw.x[:t*nx], t, nx, true) // Xᵀ, packed once for every block
	for b := 0; b*aftBlock < t; b++ {
		i0, i1, bw, _ := aftBlockOf(b, t, m.Spec.Bidirectional)
		// dEw rows i0…i1−1 (keys < bw) = D rows · X rowsᵀ, then dw += Ew ⊙ dEw.
		m.eng.MulPanels(ws.aDEw[:(i1-i0)*bw], ws.aD[i0*nx:i1*nx], &ws.aX, i1-i0, bw, nx, false)
		j.phase, j.b = aftPhaseDw, b
		m.run(blocks(i1-i0, rowBlock), j)
	}
	*j = aftFullJob{}
	// The directly computed (i, c), in a fixed order, in the sequences
	// phase Z found them in.
	for s := 0; s < ws.b; s++ {
		if !ws.aTiny[l*ws.b+s] {
			continue
		}
		for i := 0; i < t; i++ {
			nd := lw.nd[i*nx+s*2*d : i*nx+(s+1)*2*d]
			for c := 0; c < d; c++ {
				if nd[d+c] < aftTiny {
					if dz := ws.dy[(s*t+i)*d+c]; dz != 0 {
						m.aftExact(ws, l, s, i, c, dz)
					}
				}
			}
		}
	}
}
