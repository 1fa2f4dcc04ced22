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
// every edge shape mr×nr, with A and B packed, row-major and transposed
// (NaN canaries in every float they do not address), canaries in the gaps
// between the rows of c (ldc > nr) and after it, and misaligned slices.
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

// checkGemmTile runs the micro-kernel over the shapes and layouts and
// returns the problems found.
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
					alen, blen := 0, 0
					if kc > 0 {
						alen = (mrMax-1)*ai + (kc-1)*ap + 1
						blen = (kc-1)*bp + nrMax
					}
					a := make([]float32, lead+alen+tail)[lead:]
					b := make([]float32, lead+blen+tail)[lead:]
					for i := range a {
						a[i] = canary
					}
					for i := range b {
						b[i] = canary
					}
					for p := 0; p < kc; p++ {
						for i := 0; i < mrMax; i++ {
							a[i*ai+p*ap] = float32(rng.NormFloat64())
						}
						for j := 0; j < nrMax; j++ {
							b[p*bp+j] = float32(rng.NormFloat64())
						}
					}
					ldc := nr + 3
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
					// The epilogue's four modes, in turn over the shapes: with
					// or without a bias row, adding to c or overwriting it.
					mode := (kc + mr + nr) % 8
					var bias []float32
					if mode&1 != 0 {
						bias = make([]float32, lead+nr+tail)[lead:]
						for j := range bias {
							bias[j] = canary
						}
						for j := 0; j < nr; j++ {
							bias[j] = float32(rng.NormFloat64())
						}
						bias = bias[:nr]
					}
					overwrite := mode&2 != 0
					// A's row sums, when its columns are contiguous: asum
					// starts nonzero, with canaries after its mr floats.
					var asum, asum0, asumBuf []float32
					if mode&4 != 0 && ai == 1 {
						asumBuf = make([]float32, lead+mr+tail)
						for i := range asumBuf {
							asumBuf[i] = canary
						}
						asum = asumBuf[lead : lead+mr]
						for i := range asum {
							asum[i] = float32(rng.NormFloat64())
						}
						asum0 = append([]float32(nil), asum...)
					}
					// Copies of A's block (ai = 1) and B's, in turn over the
					// shapes, into buffers of canaries.
					var apack, bpack, apackBuf, bpackBuf []float32
					copies := (kc + mr + 2*nr) % 3
					if copies == 2 && ai == 1 {
						apackBuf = make([]float32, lead+kc*mrMax+tail)
						for i := range apackBuf {
							apackBuf[i] = canary
						}
						apack = apackBuf[lead : lead+kc*mrMax]
					}
					if copies > 0 {
						bpackBuf = make([]float32, lead+kc*nrMax+tail)
						for i := range bpackBuf {
							bpackBuf[i] = canary
						}
						bpack = bpackBuf[lead : lead+kc*nrMax]
					}
					tile(kc, a[:alen], ai, ap, mrMax*ai, b[:blen], bp, c[:clen], ldc, mr, nr, bias, asum, apack, bpack, overwrite)
					label := fmt.Sprintf("%s kc=%d mr=%d nr=%d bias=%v overwrite=%v asum=%v apack=%v bpack=%v", lay.name, kc, mr, nr, bias != nil, overwrite, asum != nil, apack != nil, bpack != nil)
					probs = append(probs, checkCopy(label+": apack", apackBuf, kc, mrMax, func(p, i int) float32 { return a[i*ai+p*ap] })...)
					probs = append(probs, checkCopy(label+": bpack", bpackBuf, kc, nrMax, func(p, j int) float32 { return b[p*bp+j] })...)
					for idx, v := range asumBuf {
						r := idx - lead
						if r < 0 || r >= mr {
							if math.Float32bits(v) != canaryBits {
								probs = append(probs, fmt.Sprintf("%s: wrote asum outside its %d floats at buffer index %d", label, mr, idx))
							}
							continue
						}
						want, mag := float64(asum0[r]), math.Abs(float64(asum0[r]))
						for p := 0; p < kc; p++ {
							want += float64(a[r+p*ap])
							mag += math.Abs(float64(a[r+p*ap]))
						}
						if d := math.Abs(float64(v) - want); !(d <= 1e-6*float64(kc+2)*mag+1e-30) {
							probs = append(probs, fmt.Sprintf("%s: asum[%d] = %g, want %g", label, r, v, want))
						}
						// The contract's order, bit for bit: one float32
						// accumulator from 0 over p, then added to asum.
						var s32 float32
						for p := 0; p < kc; p++ {
							s32 += a[r+p*ap]
						}
						if w32 := asum0[r] + s32; math.Float32bits(v) != math.Float32bits(w32) {
							probs = append(probs, fmt.Sprintf("%s: asum[%d] = %g, want %g bit for bit (one accumulator over p in order)", label, r, v, w32))
						}
					}
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
						if overwrite {
							want, mag = 0, 0
						}
						if bias != nil {
							want += float64(bias[q])
							mag += math.Abs(float64(bias[q]))
						}
						for p := 0; p < kc; p++ {
							x := float64(a[r*ai+p*ap]) * float64(b[p*bp+q])
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
	}
	return probs
}

// checkCopy returns the problems of buf, a guarded copy of an operand's
// block as a packed panel of w floats per p (nil: none asked for): each
// float of the panel must be at's, bit for bit, and the guards canaries.
func checkCopy(label string, buf []float32, kc, w int, at func(p, i int) float32) []string {
	var probs []string
	for idx, v := range buf {
		r := idx - lead
		if r < 0 || r >= kc*w {
			if math.Float32bits(v) != canaryBits {
				probs = append(probs, fmt.Sprintf("%s: wrote outside its %d floats at buffer index %d", label, kc*w, idx))
			}
			continue
		}
		if want := at(r/w, r%w); math.Float32bits(v) != math.Float32bits(want) {
			probs = append(probs, fmt.Sprintf("%s[%d] = %g, want %g", label, r, v, want))
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
