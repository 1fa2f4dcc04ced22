package kerneltest

import (
	"fmt"
	"math"
	"strings"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// The GEMM micro-kernel's tile shape MR×NR is the level's own, so the
// reference level cannot be called on the same tile: it is called on each
// of its own tiles within it (in padded copies of the operands, since it
// reads whole tiles of its shape), which is how runtime/mat would cover
// the same block with it.

// gemmGeom is a GemmTile case's geometry for a tile of mrMax×nrMax.
type gemmGeom struct {
	kc, mr, nr, ai, ap, bp, ldc int
	at                          int // A's step from tile to tile (0: MR·ai)
	bias, asum, overwrite       bool
	packA, packB                bool // ask for copies of A's and B's blocks
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
func gemmGeomOf(c Case, mrMax, nrMax int) (gemmGeom, error) {
	kc := c.T
	switch c.Inputs {
	case "packed":
		return gemmGeom{kc: kc, mr: mrMax, nr: nrMax, ai: 1, ap: mrMax, bp: nrMax, ldc: nrMax + 3, bias: true, asum: true, overwrite: true}, nil
	case "rowmajor-edge":
		return gemmGeom{kc: kc, mr: max(mrMax-1, 1), nr: max(nrMax-3, 1), ai: kc + 5, ap: 1, bp: nrMax + 7, ldc: nrMax + 1}, nil
	case "colmajor-edge":
		return gemmGeom{kc: kc, mr: 1, nr: min(nrMax/2+1, nrMax), ai: 1, ap: mrMax + 3, bp: 2*nrMax + 1, ldc: nrMax, bias: true, asum: true}, nil
	case "packed-corner":
		return gemmGeom{kc: kc, mr: 1, nr: 1, ai: 1, ap: mrMax, bp: nrMax, ldc: 1, bias: true, overwrite: true}, nil
	case "colmajor-copies":
		return gemmGeom{kc: kc, mr: mrMax, nr: nrMax, ai: 1, ap: mrMax + 5, bp: nrMax + 9, ldc: nrMax + 2, asum: true, packA: true, packB: true}, nil
	case "rowmajor-copyb":
		return gemmGeom{kc: kc, mr: max(mrMax-2, 1), nr: max(nrMax-1, 1), ai: kc + 2, ap: 1, bp: nrMax + 1, ldc: nrMax, overwrite: true, packB: true}, nil
	case "tiles-rowmajor-copyb":
		return gemmGeom{kc: kc, mr: 3 * mrMax, nr: max(nrMax-1, 1), ai: kc + 3, ap: 1, bp: nrMax + 5, ldc: nrMax + 4, bias: true, overwrite: true, packB: true}, nil
	case "tiles-colmajor-copies":
		return gemmGeom{kc: kc, mr: 2*mrMax + 1, nr: nrMax, ai: 1, ap: 3*mrMax + 5, bp: nrMax + 9, ldc: nrMax + 2, asum: true, packA: true, packB: true}, nil
	case "tiles-panels":
		return gemmGeom{kc: kc, mr: 2*mrMax + 2, nr: nrMax, ai: 1, ap: mrMax, at: mrMax*kc + 3, bp: nrMax + 3, ldc: nrMax + 1, bias: true, packB: true}, nil
	}
	return gemmGeom{}, fmt.Errorf("GemmTile has no case with inputs %q", c.Inputs)
}

// gemmBuf is one operand: a guarded buffer, its active entries and its
// role.
type gemmBuf struct {
	name   string
	role   role
	need   int
	buf    []float32
	active []bool
}

func (b *gemmBuf) view() []float32 { return b.buf[lead : lead+b.need] }

// newGemmBuf allocates an operand of need floats whose active entries,
// visited by each, start as normal values (or unwritten markers for an
// overwritten output).
func newGemmBuf(name string, r role, need int, each func(visit func(i int)), next func() float32) *gemmBuf {
	b := &gemmBuf{name: name, role: r, need: need, buf: make([]float32, lead+need+tail), active: make([]bool, lead+need+tail)}
	for i := range b.buf {
		b.buf[i] = canary
	}
	each(func(i int) {
		b.active[lead+i] = true
		if r == out {
			b.buf[lead+i] = unwritten
		} else {
			b.buf[lead+i] = next()
		}
	})
	return b
}

// compareGemm is Compare for GemmTile: got's tile at got's shape against
// ref's tiles covering it.
func compareGemm(spec specs.Spec, c Case, ref, got kernels.Set) ([]string, error) {
	for _, s := range []kernels.Set{ref, got} {
		if s.GemmTile == nil || s.GemmShape == nil {
			return nil, fmt.Errorf("the %s set of spec %s has no GemmTile and GemmShape", s.ISA, spec.Name)
		}
	}
	mrMax, nrMax := got.GemmShape()
	g, err := gemmGeomOf(c, mrMax, nrMax)
	if err != nil {
		return nil, err
	}
	if g.at == 0 {
		g.at = mrMax * g.ai
	}
	rng := rngFor(spec.Name, "GemmTile", c.T, c.Inputs, mrMax, nrMax)
	next := func() float32 { return float32(rng.NormFloat64()) }
	kc, mr, nr := g.kc, g.mr, g.nr
	// The kernel reads MR whole rows of A for each of its tiles, tile r's
	// from a[r·at:]; aAt is A's row i, column p.
	tiles := max(1, (mr+mrMax-1)/mrMax)
	rowsA := tiles * mrMax
	aAt := func(i, p int) int { return i/mrMax*g.at + i%mrMax*g.ai + p*g.ap }
	aNeed, bNeed := 0, 0
	if kc > 0 {
		aNeed, bNeed = aAt(rowsA-1, kc-1)+1, (kc-1)*g.bp+nrMax
	}
	cRole := acc
	if g.overwrite {
		cRole = out
	}
	a := newGemmBuf("a", in, aNeed, func(v func(int)) {
		for p := 0; p < kc; p++ {
			for i := 0; i < rowsA; i++ {
				v(aAt(i, p))
			}
		}
	}, next)
	b := newGemmBuf("b", in, bNeed, func(v func(int)) {
		for p := 0; p < kc; p++ {
			for j := 0; j < nrMax; j++ {
				v(p*g.bp + j)
			}
		}
	}, next)
	bias := newGemmBuf("bias", in, 0, func(func(int)) {}, next)
	if g.bias {
		bias = newGemmBuf("bias", in, nr, func(v func(int)) {
			for j := 0; j < nr; j++ {
				v(j)
			}
		}, next)
	}
	asum := newGemmBuf("asum", acc, 0, func(func(int)) {}, next)
	if g.asum {
		asum = newGemmBuf("asum", acc, mr, func(v func(int)) {
			for i := 0; i < mr; i++ {
				v(i)
			}
		}, next)
	}
	cb := newGemmBuf("c", cRole, (mr-1)*g.ldc+nr, func(v func(int)) {
		for i := 0; i < mr; i++ {
			for j := 0; j < nr; j++ {
				v(i*g.ldc + j)
			}
		}
	}, next)
	bufs := []*gemmBuf{a, b, bias, asum, cb}
	// The copies are exact: their wanted values are A's and B's floats.
	want := map[string][]float32{}
	apack := newGemmBuf("apack", out, 0, func(func(int)) {}, next)
	if g.packA {
		apack = newGemmBuf("apack", out, kc*rowsA, func(v func(int)) {
			for i := 0; i < kc*rowsA; i++ {
				v(i)
			}
		}, next)
		// Tile r's panel at r·MR·kc.
		w := make([]float32, kc*rowsA)
		for r := 0; r < rowsA; r += mrMax {
			for p := 0; p < kc; p++ {
				for i := 0; i < mrMax; i++ {
					w[r*kc+p*mrMax+i] = a.view()[aAt(r+i, p)]
				}
			}
		}
		want["apack"] = w
	}
	bpack := newGemmBuf("bpack", out, 0, func(func(int)) {}, next)
	if g.packB {
		bpack = newGemmBuf("bpack", out, kc*nrMax, func(v func(int)) {
			for i := 0; i < kc*nrMax; i++ {
				v(i)
			}
		}, next)
		w := make([]float32, kc*nrMax)
		for p := 0; p < kc; p++ {
			for j := 0; j < nrMax; j++ {
				w[p*nrMax+j] = b.view()[p*g.bp+j]
			}
		}
		want["bpack"] = w
	}
	bufs = append(bufs, apack, bpack)

	// Reference: ref's tiles over the mr×nr corner, on padded copies.
	rmr, rnr := ref.GemmShape()
	rows, cols := (mr+rmr-1)/rmr*rmr, (nr+rnr-1)/rnr*rnr
	pad := func(src []float32, n int) []float32 {
		d := make([]float32, max(n, len(src)))
		for i, x := range src {
			if !isMarker(x) {
				d[i] = x
			}
		}
		return d
	}
	// A for the reference: column-major, lda rows apart (ai 1, which row
	// sums need; the tiles' layout is got's), rows past rowsA zero.
	lda := max(rows, rowsA)
	ra, rb := []float32(nil), b.view()
	if kc > 0 {
		ra = make([]float32, lda*kc)
		for i := 0; i < rowsA; i++ {
			for p := 0; p < kc; p++ {
				ra[p*lda+i] = a.view()[aAt(i, p)]
			}
		}
		rb = pad(rb, (kc-1)*g.bp+cols+rnr)
	}
	rbias := pad(bias.view(), 0)
	if g.bias {
		rbias = pad(bias.view(), cols+rnr)
	}
	rasum := append([]float32(nil), asum.view()...)
	rc := append([]float32(nil), cb.view()...)
	for i0 := 0; i0 < mr; i0 += rmr {
		for j0 := 0; j0 < nr; j0 += rnr {
			var bi, as []float32
			if g.bias {
				bi = rbias[j0:]
			}
			if g.asum && j0 == 0 {
				as = rasum[i0:]
			}
			var av, bv []float32
			if kc > 0 {
				av, bv = ra[i0:], rb[j0:]
			}
			ref.GemmTile(kc, av, 1, lda, rmr, bv, g.bp, rc[i0*g.ldc+j0:], g.ldc, min(rmr, mr-i0), min(rnr, nr-j0), bi, as, nil, nil, g.overwrite)
		}
	}
	want["c"], want["asum"] = rc, rasum

	// got, on copies of the guarded buffers.
	gotBufs := map[string][]float32{}
	for _, x := range bufs {
		gotBufs[x.name] = append([]float32(nil), x.buf...)
	}
	v := func(name string, n int) []float32 { return gotBufs[name][lead : lead+n] }
	got.GemmTile(kc, v("a", a.need), g.ai, g.ap, g.at, v("b", b.need), g.bp, v("c", cb.need), g.ldc, mr, nr,
		v("bias", bias.need), v("asum", asum.need), v("apack", apack.need), v("bpack", bpack.need), g.overwrite)

	var problems []string
	for _, x := range bufs {
		gb := gotBufs[x.name]
		w := want[x.name]
		scale := 0.0
		for _, y := range w {
			if !isMarker(y) && !math.IsNaN(float64(y)) && !math.IsInf(float64(y), 0) {
				scale = math.Max(scale, math.Abs(float64(y)))
			}
		}
		var list []string
		n := 0
		for i, y := range gb {
			var msg string
			switch {
			case !x.active[i] || x.role == in:
				if math.Float32bits(y) != math.Float32bits(x.buf[i]) {
					msg = fmt.Sprintf("[%d] %s → %s (may not write there)", i-lead, fmtVal(x.buf[i]), fmtVal(y))
				}
			case math.Float32bits(y) == unwrittenBits:
				msg = fmt.Sprintf("[%d] left unwritten", i-lead)
			case x.name == "apack" || x.name == "bpack":
				if math.Float32bits(y) != math.Float32bits(w[i-lead]) {
					msg = fmt.Sprintf("[%d] got %s, want a copy of %s", i-lead, fmtVal(y), fmtVal(w[i-lead]))
				}
			case !closeTo(y, w[i-lead], scale):
				msg = fmt.Sprintf("[%d] got %s, want %s ± %.3g", i-lead, fmtVal(y), fmtVal(w[i-lead]), RelTol*(math.Abs(float64(w[i-lead]))+scale))
			}
			if msg != "" {
				if n < maxReports {
					list = append(list, msg)
				}
				n++
			}
		}
		if n > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d floats wrong (kc %d, tile %d×%d of %d×%d, ai %d, ap %d, at %d, bp %d, ldc %d, bias %v, asum %v, overwrite %v, apack %v, bpack %v; reference: %s tiles of %d×%d): %s",
				x.name, n, kc, mr, nr, mrMax, nrMax, g.ai, g.ap, g.at, g.bp, g.ldc, g.bias, g.asum, g.overwrite, g.packA, g.packB, ref.ISA, rmr, rnr, strings.Join(list, "; ")))
		}
	}
	return problems, nil
}
