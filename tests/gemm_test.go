package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// TestGemmTile checks the GEMM micro-kernel of every linked spec at every
// level this run allows against a float64 reference, for awkward kc and
// every edge shape mr×nr, with canaries in the gaps between the rows of c
// (ldc > nr) and after it, and misaligned slices.
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

// checkGemmTile runs the micro-kernel over the shapes and returns the
// problems found.
func checkGemmTile(tile kernels.GemmTileFunc, shape kernels.GemmShapeFunc, seed string) []string {
	mrMax, nrMax := shape()
	var probs []string
	if mrMax < 1 || nrMax < 1 {
		return []string{fmt.Sprintf("shape %d×%d", mrMax, nrMax)}
	}
	rng := rand.New(rand.NewPCG(uint64(len(seed)), 7))
	for _, kc := range []int{0, 1, 2, 3, 7, 33, 256, 257} {
		for mr := 0; mr <= mrMax; mr++ {
			for nr := 0; nr <= nrMax; nr++ {
				if kc > 33 && nr%5 != 0 && nr != nrMax {
					continue // the long kc at fewer widths
				}
				ldc := nr + 3
				a := make([]float32, lead+kc*mrMax+tail)[lead:]
				b := make([]float32, lead+kc*nrMax+tail)[lead:]
				for i := range a[:kc*mrMax] {
					a[i] = float32(rng.NormFloat64())
				}
				for i := range b[:kc*nrMax] {
					b[i] = float32(rng.NormFloat64())
				}
				clen := 0
				if mr > 0 {
					clen = (mr-1)*ldc + nr
				}
				cbuf := make([]float32, lead+clen+tail)
				for i := range cbuf {
					cbuf[i] = canary
				}
				c := cbuf[lead:]
				c0 := make([]float32, clen)
				for i := 0; i < mr; i++ {
					for j := 0; j < nr; j++ {
						v := float32(rng.NormFloat64())
						c[i*ldc+j], c0[i*ldc+j] = v, v
					}
				}
				tile(kc, a[:kc*mrMax], b[:kc*nrMax], c[:clen], ldc, mr, nr)
				label := fmt.Sprintf("kc=%d mr=%d nr=%d", kc, mr, nr)
				for idx, v := range cbuf {
					r, q := (idx-lead)/max(ldc, 1), (idx-lead)%max(ldc, 1)
					inside := idx >= lead && idx < lead+clen && q < nr && r < mr
					if !inside {
						if math.Float32bits(v) != canaryBits {
							probs = append(probs, fmt.Sprintf("%s: wrote outside the tile at buffer index %d", label, idx))
						}
						continue
					}
					want, mag := float64(c0[r*ldc+q]), math.Abs(float64(c0[r*ldc+q]))
					for p := 0; p < kc; p++ {
						x := float64(a[p*mrMax+r]) * float64(b[p*nrMax+q])
						want += x
						mag += math.Abs(x)
					}
					if d := math.Abs(float64(v) - want); !(d <= 1e-6*float64(kc+2)*mag+1e-30) {
						probs = append(probs, fmt.Sprintf("%s: c[%d][%d] = %g, want %g", label, r, q, v, want))
					}
				}
				if len(probs) > 10 {
					return probs
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
		"drops the last p": func(kc int, a, b, c []float32, ldc, mr, nr int) {
			if kc > 0 {
				kc--
			}
			good(kc, a, b, c, ldc, mr, nr)
		},
		"overwrites c": func(kc int, a, b, c []float32, ldc, mr, nr int) {
			for i := 0; i < mr; i++ {
				clear(c[i*ldc : i*ldc+nr])
			}
			good(kc, a, b, c, ldc, mr, nr)
		},
		"writes the full tile width": func(kc int, a, b, c []float32, ldc, mr, nr int) {
			good(kc, a, b, c, ldc, mr, nr)
			if cc := c[:cap(c)]; mr > 0 && nr < nrMax && nr < len(cc) {
				cc[nr] = 0
			}
		},
		"writes one row too many": func(kc int, a, b, c []float32, ldc, mr, nr int) {
			good(kc, a, b, c, ldc, mr, nr)
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
