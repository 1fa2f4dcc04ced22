package mat

// Panels is the right operand B of several products, packed once for all
// of them into the micro-kernel's panels of NR columns, when the products
// read leading parts of one matrix (aft_full's row blocks read the keys
// before each block's last row): each product would otherwise pack its
// part again. Its zero value is ready for PackB; the panels' buffer grows
// to the largest operand once and is reused. With a bf16 kernel
// (SetBF16) the panels are bf16, in the kernel's layout (bf16.PackB), and
// the products on them run in bf16.
type Panels struct {
	src        []float32 // B as given
	n, k       int       // B's columns j and inner rows p
	transposed bool      // B(j, p) = src[j·k + p]; else src[p·n + j]
	data       []float32 // the panels, k·NR floats each (micro-kernel only)
	packed     bool      // data holds B
	half       []uint16  // the bf16 panels, bf16.BPanel(kp) each (bf16 kernel only)
	kp         int       // their padded depth; 0: half does not hold B
}

// PackB prepares B for MulPanels: B(j, p) = b[p·n + j] (b is [k, n]
// row-major, the weight of an input-gradient product), or with transposed
// B(j, p) = b[j·k + p] (b is [n, k] row-major, as MulNT's B), for j < n and
// p < k. b must not change while the products read it. With a bf16
// kernel B is rounded to bf16 (nearest even) and packed for it.
func (e *Engine) PackB(pn *Panels, b []float32, n, k int, transposed bool) {
	pn.src, pn.n, pn.k, pn.transposed, pn.packed, pn.kp = b, n, k, transposed, false, 0
	if n == 0 || k == 0 {
		return
	}
	if e.bf.k != nil {
		e.packPanelsBF16(pn)
		return
	}
	if e.mk.tile == nil {
		return
	}
	nr := e.mk.nr
	size := ceilDiv(n, nr) * nr * k
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
// any k ≤ pn.k with all pn.n columns. On float32 panels the results are
// bit for bit those of the products on the unpacked B (MulNT,
// LinearBackX).
//
// On bf16 panels (PackB with a bf16 kernel) the product runs on the bf16
// kernel: A rounded to bf16, float32 sums. The inner dimension is padded to
// bf16.Step with A's zeros, so a k short of pn.k and of a multiple of
// bf16.Step multiplies B's values at p ≥ k up to the next multiple by
// zero: they must be finite.
func (e *Engine) MulPanels(c, a []float32, pn *Panels, m, n, k int, accumulate bool) {
	if n > pn.n || k > pn.k || !pn.transposed && n != pn.n {
		panic("mat: MulPanels reads past the packed operand")
	}
	if pn.kp > 0 && e.bfOK(m, n, k) {
		e.mulPanelsBF16(c, a, pn, m, n, k, accumulate)
		return
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
