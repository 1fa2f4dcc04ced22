package kerneltest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/synthgen/synthgen/kerneltest/harness"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// The GEMM micro-kernel's tile shape MR×NR is the level's own, so its
// levels cannot be compared call for call: each call is checked against a
// float64 reference instead (CheckGemmTile), the one checker of the
// micro-kernel, which tests/ runs over every corner of the tile too.

// GemmGeom is one call of the GEMM micro-kernel (kernels.GemmTileFunc):
// kc, the rows mr and columns nr of c it computes, A's strides ai, ap and
// its step at from tile to tile (0: MR·ai), B's row stride bp, c's ldc,
// and whether it adds a bias row, accumulates A's row sums, overwrites c,
// and copies A's and B's blocks into packed panels.
type GemmGeom struct {
	KC, MR, NR, AI, AP, AT, BP, LDC int
	Bias, Asum, Overwrite           bool
	PackA, PackB                    bool
}

// String describes the geometry for a report.
func (g GemmGeom) String() string {
	return fmt.Sprintf("kc %d, mr %d, nr %d, ai %d, ap %d, at %d, bp %d, ldc %d, bias %v, asum %v, overwrite %v, apack %v, bpack %v",
		g.KC, g.MR, g.NR, g.AI, g.AP, g.AT, g.BP, g.LDC, g.Bias, g.Asum, g.Overwrite, g.PackA, g.PackB)
}

// gemmCases are GemmTile's cases: T is kc, Inputs the layout and corner.
func gemmCases(spec specs.Spec) []Case {
	c := func(kc int, in string) Case { return Case{T: kc, Inputs: in, unit: "kc"} }
	return []Case{
		c(spec.D, "packed"), c(spec.D, "rowmajor-edge"), c(13, "colmajor-edge"),
		c(1, "packed-corner"), c(0, "packed"),
		c(spec.D, "colmajor-copies"), c(13, "rowmajor-copyb"), c(1, "colmajor-copies"),
		c(spec.D, "tiles-rowmajor-copyb"), c(0, "tiles-rowmajor-copyb"), c(13, "tiles-colmajor-copies"),
		c(spec.D, "tiles-colmajor-copies"), c(spec.D, "tiles-panels"), c(2, "tiles-panels"),
	}
}

// gemmGeomOf lays case c out for a tile of mrMax×nrMax:
//
//   - packed: A a packed panel (ai 1, ap MR), the whole tile, with bias and
//     A's row sums, overwriting;
//   - rowmajor-edge: A row-major (ai kc+5, ap 1), B rows NR+7 apart, an
//     (MR−1)×(NR−3) corner, accumulating, no bias;
//   - colmajor-edge: A column-major (ai 1, ap MR+3), B rows 2·NR+1 apart, a
//     1×(NR/2+1) corner, with bias and row sums, accumulating;
//   - packed-corner: a 1×1 corner, with bias, overwriting;
//   - colmajor-copies: A column-major (ai 1, ap MR+5), B rows NR+9 apart,
//     the whole tile, with row sums, accumulating, copying A's and B's
//     blocks into packed panels (apack, bpack) on the way;
//   - rowmajor-copyb: A row-major (ai kc+2, ap 1), B rows NR+1 apart, an
//     (MR−2)×(NR−1) corner, overwriting, copying B's block;
//   - tiles-rowmajor-copyb: three tiles in one call (mr 3·MR), A row-major
//     (ai kc+3, ap 1), B rows NR+5 apart, nr NR−1, with bias, overwriting,
//     copying B's block (which the second and third tiles read);
//   - tiles-colmajor-copies: two tiles and a part (mr 2·MR+1), A
//     column-major (ai 1, ap 3·MR+5), B rows NR+9 apart, the full width,
//     with row sums, accumulating, copying each tile's block of A and B's;
//   - tiles-panels: two tiles and a part (mr 2·MR+2) reading A's packed
//     panels (ai 1, ap MR), at MR·kc+3 (so a gap between panels), B rows
//     NR+3 apart, the full width, with bias, accumulating, copying B's block.
func gemmGeomOf(c Case, mrMax, nrMax int) (GemmGeom, error) {
	kc := c.T
	switch c.Inputs {
	case "packed":
		return GemmGeom{KC: kc, MR: mrMax, NR: nrMax, AI: 1, AP: mrMax, BP: nrMax, LDC: nrMax + 3, Bias: true, Asum: true, Overwrite: true}, nil
	case "rowmajor-edge":
		return GemmGeom{KC: kc, MR: max(mrMax-1, 1), NR: max(nrMax-3, 1), AI: kc + 5, AP: 1, BP: nrMax + 7, LDC: nrMax + 1}, nil
	case "colmajor-edge":
		return GemmGeom{KC: kc, MR: 1, NR: min(nrMax/2+1, nrMax), AI: 1, AP: mrMax + 3, BP: 2*nrMax + 1, LDC: nrMax, Bias: true, Asum: true}, nil
	case "packed-corner":
		return GemmGeom{KC: kc, MR: 1, NR: 1, AI: 1, AP: mrMax, BP: nrMax, LDC: 1, Bias: true, Overwrite: true}, nil
	case "colmajor-copies":
		return GemmGeom{KC: kc, MR: mrMax, NR: nrMax, AI: 1, AP: mrMax + 5, BP: nrMax + 9, LDC: nrMax + 2, Asum: true, PackA: true, PackB: true}, nil
	case "rowmajor-copyb":
		return GemmGeom{KC: kc, MR: max(mrMax-2, 1), NR: max(nrMax-1, 1), AI: kc + 2, AP: 1, BP: nrMax + 1, LDC: nrMax, Overwrite: true, PackB: true}, nil
	case "tiles-rowmajor-copyb":
		return GemmGeom{KC: kc, MR: 3 * mrMax, NR: max(nrMax-1, 1), AI: kc + 3, AP: 1, BP: nrMax + 5, LDC: nrMax + 4, Bias: true, Overwrite: true, PackB: true}, nil
	case "tiles-colmajor-copies":
		return GemmGeom{KC: kc, MR: 2*mrMax + 1, NR: nrMax, AI: 1, AP: 3*mrMax + 5, BP: nrMax + 9, LDC: nrMax + 2, Asum: true, PackA: true, PackB: true}, nil
	case "tiles-panels":
		return GemmGeom{KC: kc, MR: 2*mrMax + 2, NR: nrMax, AI: 1, AP: mrMax, AT: mrMax*kc + 3, BP: nrMax + 3, LDC: nrMax + 1, Bias: true, PackB: true}, nil
	}
	return GemmGeom{}, fmt.Errorf("GemmTile has no case with inputs %q", c.Inputs)
}

// compareGemm is Compare for GemmTile: got's micro-kernel on case c's
// geometry for its tile shape, against the float64 reference
// (CheckGemmTile); ref has nothing to add.
func compareGemm(spec specs.Spec, c Case, got kernels.Set) ([]string, error) {
	if got.GemmTile == nil || got.GemmShape == nil {
		return nil, fmt.Errorf("the %s set of spec %s has no GemmTile and GemmShape", got.ISA, spec.Name)
	}
	mrMax, nrMax := got.GemmShape()
	g, err := gemmGeomOf(c, mrMax, nrMax)
	if err != nil {
		return nil, err
	}
	return CheckGemmTile(got.GemmTile, mrMax, nrMax, g, rngFor(spec.Name, "GemmTile", c.T, c.Inputs, mrMax, nrMax)), nil
}

// CheckGemmTile calls tile, a GEMM micro-kernel of tile shape
// mrMax×nrMax, once on geometry g with operands of normal values drawn
// from rng in guarded buffers (harness.Exercise: NaN canaries in every
// float of A and B it does not address, in the gaps between the rows of
// c and around every slice) and returns every problem: a float written
// outside its outputs' entries or an input changed; an entry of c off the
// float64 reference (c₀ or 0, plus the bias, plus Σ_p A[i,p]·B[p,j]) by
// more than 10⁻⁶·(kc+2)·(the sum of the magnitudes of its terms); an
// entry of asum that is not, bit for bit, asum₀ plus one float32
// accumulator of A's row over p in order (the contract's order); a copy
// of A's or B's block that is not the block, bit for bit. Each problem
// begins with the operand's name ("c: ", "asum: ", "apack: ", "bpack: ").
func CheckGemmTile(tile kernels.GemmTileFunc, mrMax, nrMax int, g GemmGeom, rng *rand.Rand) []string {
	if g.AT == 0 {
		g.AT = mrMax * g.AI
	}
	kc, mr, nr := g.KC, g.MR, g.NR
	// The kernel reads MR whole rows of A for each of its tiles (at least
	// one), tile r's from a[r·at:]; aAt is A's row i, column p.
	tiles := max(1, (mr+mrMax-1)/mrMax)
	rowsA := tiles * mrMax
	aAt := func(i, p int) int { return i/mrMax*g.AT + i%mrMax*g.AI + p*g.AP }
	next := func() float32 { return float32(rng.NormFloat64()) }
	operand := func(name string, r role, n int, active []int, on bool) *harness.Operand {
		op := &harness.Operand{Name: name, Role: r, Len: n, Span: n, Active: active, Empty: !on}
		if !on {
			op.Len, op.Span, op.Active = 0, 0, nil
		}
		if r != out {
			op.Vals = make([]float32, len(op.Active))
			for i := range op.Vals {
				op.Vals[i] = next()
			}
		}
		return op
	}
	var aIdx, bIdx, cIdx, biasIdx, asumIdx, apackIdx, bpackIdx []int
	aNeed, bNeed := 0, 0
	if kc > 0 {
		aNeed, bNeed = aAt(rowsA-1, kc-1)+1, (kc-1)*g.BP+nrMax
	}
	for p := 0; p < kc; p++ {
		for i := 0; i < rowsA; i++ {
			aIdx = append(aIdx, aAt(i, p))
		}
		for j := 0; j < nrMax; j++ {
			bIdx = append(bIdx, p*g.BP+j)
		}
	}
	cNeed := 0
	if mr > 0 {
		cNeed = (mr-1)*g.LDC + nr
	}
	for i := 0; i < mr; i++ {
		for j := 0; j < nr; j++ {
			cIdx = append(cIdx, i*g.LDC+j)
		}
	}
	for j := 0; j < nr; j++ {
		biasIdx = append(biasIdx, j)
	}
	for i := 0; i < mr; i++ {
		asumIdx = append(asumIdx, i)
	}
	for i := 0; i < kc*rowsA; i++ {
		apackIdx = append(apackIdx, i)
	}
	for i := 0; i < kc*nrMax; i++ {
		bpackIdx = append(bpackIdx, i)
	}
	cRole := acc
	if g.Overwrite {
		cRole = out
	}
	a := operand("a", in, aNeed, aIdx, true)
	b := operand("b", in, bNeed, bIdx, true)
	c := operand("c", cRole, cNeed, cIdx, true)
	c.Stride = g.LDC
	bias := operand("bias", in, nr, biasIdx, g.Bias)
	asum := operand("asum", acc, mr, asumIdx, g.Asum)
	apack := operand("apack", out, kc*rowsA, apackIdx, g.PackA)
	bpack := operand("bpack", out, kc*nrMax, bpackIdx, g.PackB)
	res := harness.Exercise([]*harness.Operand{a, b, c, bias, asum, apack, bpack}, func(s map[string][]float32) float32 {
		tile(kc, s["a"], g.AI, g.AP, g.AT, s["b"], g.BP, s["c"], g.LDC, mr, nr, s["bias"], s["asum"], s["apack"], s["bpack"], g.Overwrite)
		return 0
	})

	// The operands' values by index into their slices.
	full := func(op *harness.Operand) []float32 {
		v := make([]float32, op.Len)
		for k, j := range op.Active {
			if op.Vals != nil {
				v[j] = op.Vals[k]
			}
		}
		return v
	}
	av, bv := full(a), full(b)
	A := func(i, p int) float32 { return av[aAt(i, p)] }
	B := func(p, j int) float32 { return bv[p*g.BP+j] }
	problems := append([]string(nil), res.Problems...)
	report := func(name string, n int, list []string) {
		if n > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d floats wrong (%s; tile %d×%d): %s", name, n, g, mrMax, nrMax, strings.Join(list, "; ")))
		}
	}
	check := func(op *harness.Operand, wrong func(k, j int, got float32) string) {
		var list []string
		n := 0
		for k, x := range res.Out[op.Name] {
			if msg := wrong(k, op.Active[k], x); msg != "" {
				if n < maxReports {
					list = append(list, msg)
				}
				n++
			}
		}
		report(op.Name, n, list)
	}
	c0, bi := full(c), full(bias)
	check(c, func(k, j int, got float32) string {
		r, q := j/g.LDC, j%g.LDC
		want, mag := float64(c0[j]), math.Abs(float64(c0[j]))
		if g.Overwrite {
			want, mag = 0, 0
		}
		if g.Bias {
			want += float64(bi[q])
			mag += math.Abs(float64(bi[q]))
		}
		for p := 0; p < kc; p++ {
			x := float64(A(r, p)) * float64(B(p, q))
			want += x
			mag += math.Abs(x)
		}
		if d := math.Abs(float64(got) - want); !(d <= 1e-6*float64(kc+2)*mag+1e-30) {
			return fmt.Sprintf("c[%d][%d] = %s, want %.9g", r, q, fmtVal(got), want)
		}
		return ""
	})
	s0 := full(asum)
	check(asum, func(_, i int, got float32) string {
		var s32 float32
		for p := 0; p < kc; p++ {
			s32 += A(i, p)
		}
		if w := s0[i] + s32; math.Float32bits(got) != math.Float32bits(w) {
			return fmt.Sprintf("asum[%d] = %s, want %s bit for bit (one accumulator over p in order)", i, fmtVal(got), fmtVal(w))
		}
		return ""
	})
	// Tile r's panel of A at r·MR·kc.
	check(apack, func(_, j int, got float32) string {
		tileRow, rest := j/(mrMax*max(kc, 1))*mrMax, j%(mrMax*max(kc, 1))
		want := A(tileRow+rest%mrMax, rest/mrMax)
		if math.Float32bits(got) != math.Float32bits(want) {
			return fmt.Sprintf("apack[%d] = %s, want a copy of %s", j, fmtVal(got), fmtVal(want))
		}
		return ""
	})
	check(bpack, func(_, j int, got float32) string {
		if want := B(j/nrMax, j%nrMax); math.Float32bits(got) != math.Float32bits(want) {
			return fmt.Sprintf("bpack[%d] = %s, want a copy of %s", j, fmtVal(got), fmtVal(want))
		}
		return ""
	})
	return problems
}
