package mat

// Panels is the right operand B of several products, packed once for all
// of them into the micro-kernel's panels of NR columns, when the products
// read leading parts of one matrix (aft_full's row blocks read the keys
// before each block's last row): each product would otherwise pack its
// part again. Its zero value is ready for PackB; the panels' buffer grows
// to the largest operand once and is reused.
type Panels struct {
	src        []float32 // B as given
	n, k       int       // B's columns j and inner rows p
	transposed bool      // B(j, p) = src[j·k + p]; else src[p·n + j]
	data       []float32 // the panels, k·NR floats each (micro-kernel only)
	packed     bool
}

// PackB prepares B for MulPanels: B(j, p) = b[p·n + j] (b is [k, n]
// row-major, the weight of an input-gradient product), or with transposed
// B(j, p) = b[j·k + p] (b is [n, k] row-major, as MulNT's B), for j < n and
// p < k. b must not change while the products read it.
func (e *Engine) PackB(pn *Panels, b []float32, n, k int, transposed bool) {
	pn.src, pn.n, pn.k, pn.transposed, pn.packed = b, n, k, transposed, false
	if e.mk.tile == nil || n == 0 || k == 0 {
		return
	}
	nr := e.mk.nr
	size := e.PanelFloats(n, k)
	if len(pn.data) < size {
		pn.data = Alloc(size)
	}
	op := operand{b, 1, n}
	if transposed {
		op = operand{b, k, 1}
	}
	e.pb = packBJob{dst: pn.data[:size], b: op, n: n, k: k, nr: nr}
	e.run(e.pb.tasks(), &e.pb)
	e.pb = packBJob{}
	pn.packed = true
}

// MulPanels computes C = A·Bᵀ (overwrite) or C += A·Bᵀ (accumulate) for A
// [m, k] and C [m, n] row-major and contiguous and B (n × k) the leading
// part of the operand pn holds (PackB): c[i·n + j] = Σ_{p<k} a[i·k + p] ·
// B(j, p). Transposed operands take any n ≤ pn.n and k ≤ pn.k; the others
// any k ≤ pn.k with all pn.n columns. The results are bit for bit those
// of the products on the unpacked B (MulNT, LinearBackX).
func (e *Engine) MulPanels(c, a []float32, pn *Panels, m, n, k int, accumulate bool) {
	if n > pn.n || k > pn.k || !pn.transposed && n != pn.n {
		panic("mat: MulPanels reads past the packed operand")
	}
	if !pn.packed || m == 0 {
		if pn.transposed {
			e.gemm(c, a, pn.src, nil, nil, m, n, k, k, pn.k, accumulate)
		} else {
			e.LinearBackX(c, a, pn.src[:k*n], m, n, k, accumulate)
		}
		return
	}
	e.reservePacks()
	e.runPacked(c, nil, operand{a, k, 1}, operand{}, pn.data, pn.k*e.mk.nr, nil, nil, m, n, k, n, accumulate, nil)
}
