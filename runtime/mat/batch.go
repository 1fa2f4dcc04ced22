package mat

import (
	"fmt"

	"github.com/synthgen/synthgen/runtime/bf16"
)

// Batches of small products on the bf16 kernel: attention's, one or more
// per (sequence, head) — P·V in the forward, dY·Vᵀ and Pᵀ·dY in the
// backward — all in one bf16 job (bf16.go), so that their operands are
// packed in one run on the pool and their blocks of C computed in a
// second, however small each product is.

// Strided is a matrix operand read through strides: element (i, p) is
// Data[i·RS + p·CS].
type Strided struct {
	Data   []float32
	RS, CS int
}

// Tri says which part of a batch's products is zero or not wanted, so that
// the bf16 path skips it: causal attention's triangles.
type Tri int

// The triangles.
const (
	// Full: every operand entry counts and every entry of C is computed.
	Full Tri = iota
	// LowerA: A(i, p) is taken as 0 for p > i, whatever the operand holds
	// there (the causal probabilities P in P·V): row i's inner dimension
	// is cut after p = i, rounded up to bf16.Step.
	LowerA
	// UpperA: A(i, p) is taken as 0 for p < i (Pᵀ in Pᵀ·dY): row i's
	// inner dimension starts at i, rounded down to bf16.Step.
	UpperA
	// LowerC: only C(i, j) with j ≤ i is wanted (dY·Vᵀ over the causal
	// triangle): blocks of C wholly above the diagonal are not computed,
	// and entries above it in the blocks that are hold values of A·Bᵀ.
	LowerC
)

// BatchProd is one product of MulBatchBF16: C [M×N] (row stride LDC) =
// Σ_s A[s]·B[s]ᵀ over its segments s, each A[s] [M×K] and B[s] [N×K] (the
// batch's sizes), overwriting C.
type BatchProd struct {
	C    []float32
	LDC  int
	A, B []Strided
}

// MulBatchBF16 computes every product of prods, all of the same sizes m, n
// and segments' inner length k, with bf16 operands (rounded to nearest
// even) and float32 sums, skipping what tri says is zero or unwanted (a
// triangle of A, whose products then have one segment, or of C). An
// operand of one segment that several products read (the same Data,
// strides and length) is packed once.
// Each element of C is summed in an order fixed by the sizes, so results
// are bit-identical for any number of workers. It returns an error, and
// computes nothing, without a bf16 kernel (SetBF16) or with operands that
// do not fit the sizes.
func (e *Engine) MulBatchBF16(m, n, k int, tri Tri, prods []BatchProd) error {
	if e.bf.k == nil {
		return fmt.Errorf("mat: MulBatchBF16 without a bf16 kernel")
	}
	if m < 1 || n < 1 || k < 1 {
		return fmt.Errorf("mat: MulBatchBF16 of sizes %d×%d×%d", m, n, k)
	}
	if (tri == LowerA || tri == UpperA) && m > k || tri == LowerC && m > n {
		return fmt.Errorf("mat: MulBatchBF16's triangle %d needs a square part (%d×%d×%d)", tri, m, n, k)
	}
	for i, p := range prods {
		if len(p.A) == 0 || len(p.A) != len(p.B) || (tri == LowerA || tri == UpperA) && len(p.A) != 1 {
			return fmt.Errorf("mat: MulBatchBF16 product %d has %d and %d segments", i, len(p.A), len(p.B))
		}
		if p.LDC < n || len(p.C) < (m-1)*p.LDC+n {
			return fmt.Errorf("mat: MulBatchBF16 product %d's C (length %d, stride %d) is smaller than %d×%d", i, len(p.C), p.LDC, m, n)
		}
		for s := range p.A {
			if !fits(p.A[s], m, k) || !fits(p.B[s], n, k) {
				return fmt.Errorf("mat: MulBatchBF16 product %d's segment %d does not fit %d×%d×%d", i, s, m, n, k)
			}
		}
	}
	if len(prods) == 0 {
		return nil
	}
	j := &e.bf.job
	j.begin(e.bf.k)
	keys := e.bf.keys[:0]
	side := func(ops []Strided, b bool, rows int) int {
		kk := bfKey{&ops[0].Data[0], len(ops[0].Data), ops[0].RS, ops[0].CS, b, tri}
		if len(ops) == 1 {
			for _, x := range keys {
				if x.bfKey == kk {
					return x.side
				}
			}
		}
		for _, o := range ops {
			j.seg(operand{o.Data, o.RS, o.CS}, k)
		}
		s := j.side(b, rows)
		if !b && (tri == LowerA || tri == UpperA) {
			j.sides[s].tri = tri
		}
		if len(ops) == 1 {
			keys = append(keys, bfKeyed{kk, s})
		}
		return s
	}
	for _, p := range prods {
		sa := side(p.A, false, m)
		sb := side(p.B, true, n)
		j.prod(sa, sb, p.C, nil, nil, nil, p.LDC, false)
		j.prods[len(j.prods)-1].tri = tri
	}
	clear(keys)
	e.bf.keys = keys[:0]
	e.bfRun()
	return nil
}

// bfKey names an operand of MulBatchBF16 (one segment) by its data and
// strides; bfKeyed is the side it was packed into.
type bfKey struct {
	p      *float32
	n      int
	rs, cs int
	b      bool
	tri    Tri
}

type bfKeyed struct {
	bfKey
	side int
}

// fits reports whether o holds an r×k matrix.
func fits(o Strided, r, k int) bool {
	if len(o.Data) == 0 || o.RS < 0 || o.CS < 0 {
		return false
	}
	return (r-1)*o.RS+(k-1)*o.CS < len(o.Data)
}

// triPack is the inner indices [k0, k1) of A that the rows of the
// bfBlockM-row block holding row r may read under tri (triRange of any C
// block holding r: C's blocks are bfBlockM rows or that halved, so they
// lie within one bfBlockM-row block), of a padded inner dimension kp: the
// part of those rows that packing must write.
func triPack(tri Tri, r, kp int) (k0, k1 int) {
	b0 := r / bfBlockM * bfBlockM
	switch tri {
	case LowerA:
		return 0, min(kp, bf16.Pad(b0+bfBlockM))
	case UpperA:
		return min(kp, b0), kp
	}
	return 0, kp
}

// triRange is the inner indices [k0, k1) that rows i0 ≤ i < i1 of a
// product's A need under tri, of a padded inner dimension kp.
func triRange(tri Tri, i0, i1, kp int) (k0, k1 int) {
	switch tri {
	case LowerA:
		return 0, min(kp, bf16.Pad(i1))
	case UpperA:
		return i0 / bf16.Step * bf16.Step, kp
	}
	return 0, kp
}
