package tests

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/synthgen/synthgen/kerneltest"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// TestGemmTile checks the GEMM micro-kernel of every linked spec at every
// level this run allows against a float64 reference (kerneltest's
// CheckGemmTile), for awkward kc and every edge shape mr×nr, with A and B
// packed, row-major and transposed (NaN canaries in every float they do
// not address), canaries in the gaps between the rows of c (ldc > nr) and
// after it, and misaligned slices. TestKernels leaves GemmTile and
// GemmShape to it.
func TestGemmTile(t *testing.T) {
	limit, err := kernels.Level()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range kernels.Names() {
		sets, err := kernels.Sets(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sets {
			if s.ISA > limit {
				continue
			}
			if s.GemmTile == nil || s.GemmShape == nil {
				t.Errorf("%s %s: GemmTile %v, GemmShape %v: want both", name, s.ISA, s.GemmTile != nil, s.GemmShape != nil)
				continue
			}
			t.Run(fmt.Sprintf("%s/%s", name, s.ISA), func(t *testing.T) {
				for _, p := range checkGemmTile(s.GemmTile, s.GemmShape, name) {
					t.Error(p)
				}
			})
		}
	}
}

// gemmLayouts are the ways an operand is laid out for the micro-kernel:
// A by its strides (ai, ap) and B by its row stride bp, as functions of
// the tile shape and kc. Every float of a buffer the layout does not
// address is a NaN canary, so a kernel reading past its strides fails.
var gemmLayouts = []struct {
	name   string
	stride func(mrMax, nrMax, kc int) (ai, ap, bp int)
}{
	{"packed", func(mrMax, nrMax, kc int) (int, int, int) { return 1, mrMax, nrMax }},
	{"rowmajor", func(mrMax, nrMax, kc int) (int, int, int) { return kc + 5, 1, nrMax + 7 }},
	{"colmajor", func(mrMax, nrMax, kc int) (int, int, int) { return 1, mrMax + 3, 2*nrMax + 1 }},
}

// checkGemmTile runs the micro-kernel over the shapes and layouts, each
// call checked by kerneltest.CheckGemmTile (the one checker of the
// micro-kernel: a float64 reference, guards around and between every
// region), and returns the problems found.
func checkGemmTile(tile kernels.GemmTileFunc, shape kernels.GemmShapeFunc, seed string) []string {
	mrMax, nrMax := shape()
	var probs []string
	if mrMax < 1 || nrMax < 1 {
		return []string{fmt.Sprintf("shape %d×%d", mrMax, nrMax)}
	}
	rng := rand.New(rand.NewPCG(uint64(len(seed)), 7))
	for _, lay := range gemmLayouts {
		for _, kc := range []int{0, 1, 2, 3, 7, 33, 256, 257} {
			ai, ap, bp := lay.stride(mrMax, nrMax, kc)
			for mr := 0; mr <= mrMax; mr++ {
				for nr := 0; nr <= nrMax; nr++ {
					if kc > 33 && nr%5 != 0 && nr != nrMax {
						continue // the long kc at fewer widths
					}
					// The epilogue's four modes, in turn over the shapes: with
					// or without a bias row, adding to c or overwriting it;
					// A's row sums when its columns are contiguous; copies of
					// A's block (ai = 1) and B's.
					mode := (kc + mr + nr) % 8
					copies := (kc + mr + 2*nr) % 3
					g := kerneltest.GemmGeom{KC: kc, MR: mr, NR: nr, AI: ai, AP: ap, BP: bp, LDC: nr + 3,
						Bias: mode&1 != 0, Overwrite: mode&2 != 0, Asum: mode&4 != 0 && ai == 1,
						PackA: copies == 2 && ai == 1, PackB: copies > 0}
					for _, p := range kerneltest.CheckGemmTile(tile, mrMax, nrMax, g, rng) {
						probs = append(probs, lay.name+": "+p)
					}
					if len(probs) > 10 {
						return probs
					}
				}
			}
		}
	}
	return probs
}

// TestGemmTileCatchesBugs runs broken micro-kernels, built from the Go
// level's, through checkGemmTile: each must be caught.
func TestGemmTileCatchesBugs(t *testing.T) {
	names := kernels.Names()
	if len(names) == 0 {
		t.Fatal("no specs linked")
	}
	goK, err := kernels.LookupAt(names[0], kernels.Go)
	if err != nil {
		t.Fatal(err)
	}
	good, shape := goK.GemmTile, goK.GemmShape
	mrMax, nrMax := shape()
	bugs := map[string]kernels.GemmTileFunc{
		"drops the last p": func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
			if kc > 0 {
				kc--
			}
			good(kc, a, ai, ap, at, b, bp, c, ldc, mr, nr, bias, asum, apack, bpack, ow)
		},
		"overwrites c": func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
			good(kc, a, ai, ap, at, b, bp, c, ldc, mr, nr, bias, asum, apack, bpack, true)
		},
		"adds when told to overwrite": func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
			good(kc, a, ai, ap, at, b, bp, c, ldc, mr, nr, bias, asum, apack, bpack, false)
		},
		"drops the row sums": func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
			good(kc, a, ai, ap, at, b, bp, c, ldc, mr, nr, bias, nil, apack, bpack, ow)
		},
		"drops the bias": func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
			good(kc, a, ai, ap, at, b, bp, c, ldc, mr, nr, nil, asum, apack, bpack, ow)
		},
		"reads A as if packed": func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
			good(kc, a, 1, mrMax, at, b, bp, c, ldc, mr, nr, bias, asum, apack, bpack, ow)
		},
		"reads B as if packed": func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
			good(kc, a, ai, ap, at, b, nrMax, c, ldc, mr, nr, bias, asum, apack, bpack, ow)
		},
		"writes the full tile width": func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
			good(kc, a, ai, ap, at, b, bp, c, ldc, mr, nr, bias, asum, apack, bpack, ow)
			if cc := c[:cap(c)]; mr > 0 && nr < nrMax && nr < len(cc) {
				cc[nr] = 0
			}
		},
		"copies B one p short": func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
			good(kc, a, ai, ap, at, b, bp, c, ldc, mr, nr, bias, asum, apack, bpack, ow)
			if len(bpack) >= nrMax {
				clear(bpack[len(bpack)-nrMax:])
			}
		},
		"copies A's rows in the wrong order": func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
			good(kc, a, ai, ap, at, b, bp, c, ldc, mr, nr, bias, asum, apack, bpack, ow)
			if len(apack) >= 2 {
				apack[0], apack[1] = apack[1], apack[0]
			}
		},
		"writes one row too many": func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, ow bool) {
			good(kc, a, ai, ap, at, b, bp, c, ldc, mr, nr, bias, asum, apack, bpack, ow)
			if cc := c[:cap(c)]; mr > 0 && mr < mrMax && nr > 0 && len(cc) > mr*ldc {
				cc[mr*ldc] = 0
			}
		},
	}
	for name, bug := range bugs {
		if probs := checkGemmTile(bug, shape, names[0]); len(probs) == 0 {
			t.Errorf("bug %q not caught", name)
		}
	}
}
