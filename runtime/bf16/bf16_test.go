package bf16

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// levels returns the kernels of every level that runs here, and logs the
// ones that cannot, saying why.
func levels(t testing.TB) []*Kernel {
	var out []*Kernel
	for _, l := range []Level{Go, AVX512BF16, AMX} {
		k, err := New(l)
		if err != nil {
			if !errors.Is(err, ErrNoFeature) {
				t.Fatal(err)
			}
			t.Logf("level %s not tested: %v", l, err)
			continue
		}
		out = append(out, k)
	}
	return out
}

func TestFromFloat32(t *testing.T) {
	for _, c := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81}, // above tie
		{0x3f807fff, 0x3f80}, // below tie
		{0x7f7fffff, 0x7f80}, // max float32 rounds to +Inf
		{0x7f800001, 0x7fc0}, // signalling NaN quietened
		{0x00000001, 0x0000}, // denormal flushed
		{0x807fffff, 0x8000}, // negative denormal flushed, sign kept
	} {
		if got := FromFloat32(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("FromFloat32(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

// TestConvert checks the AVX512-BF16 conversion of PackA's row-major path
// bit for bit against FromFloat32 at every length 0–70.
func TestConvert(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 70; n++ {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(r.NormFloat64()) * float32(math.Pow(2, float64(r.IntN(40)-20)))
			if r.IntN(5) == 0 {
				src[i] = math.Float32frombits(math.Float32bits(src[i])&0xffff0000 | 0x8000) // a tie
			}
		}
		dst := make([]uint16, n+20)
		for i := range dst {
			dst[i] = 0xdead
		}
		convert(dst[:n], src)
		for i, f := range src {
			if dst[i] != FromFloat32(f) {
				t.Fatalf("n=%d: dst[%d] = %#04x, want %#04x", n, i, dst[i], FromFloat32(f))
			}
		}
		for i := n; i < len(dst); i++ {
			if dst[i] != 0xdead {
				t.Fatalf("n=%d: wrote past dst at %d", n, i)
			}
		}
	}
}

// gemmRef is C0 + A·Bᵀ in float64 on the bf16-rounded operands, and the
// sum of the absolute values of its terms.
func gemmRef(c0, a, b []float32, m, n, k int) (ref, abs []float64) {
	ref, abs = make([]float64, m*n), make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			s := float64(c0[i*n+j])
			sa := math.Abs(s)
			for p := 0; p < k; p++ {
				x := float64(Round(a[i*k+p])) * float64(Round(b[j*k+p]))
				s += x
				sa += math.Abs(x)
			}
			ref[i*n+j], abs[i*n+j] = s, sa
		}
	}
	return ref, abs
}

// Tolerance: products of two bf16 values are exact in float32, so the
// only error is float32 accumulation: at most about (k+1)·2⁻²⁴ of the sum
// of the absolute values of the terms; the bound allows twice that.
func tol(abs float64, k int) float64 { return 2*float64(k+1)*0x1p-24*abs + 1e-30 }

// gemm runs C (+)= A·Bᵀ through kernel kn on operands A [m, k] and B [n, k]
// (row-major, contiguous), packing them, k blocked into kc (a multiple of
// Step): a call per tile of MR rows, or with whole, a call per B panel
// over all rows.
func gemm(kn *Kernel, c, a, b []float32, m, n, k, kc int, load, whole bool) {
	var src []float32
	if load {
		src = c
	}
	gemmFrom(kn, c, src, a, b, nil, m, n, k, kc, whole)
}

// gemmFrom is C = S + A·Bᵀ through kernel kn, S the [m, n] src (which may
// be c), or when src is nil the bias row (nil: zero): the first block of
// k starts from S, the others add to C.
func gemmFrom(kn *Kernel, c, src, a, b, bias []float32, m, n, k, kc int, whole bool) {
	kp := Pad(k)
	blocks := (m + kn.MR - 1) / kn.MR
	ap := make([]uint16, blocks*kn.ABlock(kp))
	bp := make([]uint16, BPanel(kp))
	for i0 := 0; i0 < m; i0 += kn.MR {
		kn.PackA(ap[i0/kn.MR*kn.ABlock(kp):], a, k, 1, i0, m, k, kp)
	}
	for j0 := 0; j0 < n; j0 += NR {
		PackB(bp, b, k, 1, j0, n, k, kp)
		var bs []float32
		if bias != nil {
			bs = bias[j0:]
		}
		for kb := 0; kb < kp; kb += kc {
			from := src
			if kb > 0 {
				from = c
			}
			at := func(x []float32, off int) []float32 {
				if x == nil {
					return nil
				}
				return x[off:]
			}
			if whole {
				kn.Tile(kp, kb, min(kc, kp-kb), ap, bp, c[j0:], n, m, min(NR, n-j0), at(from, j0), bs)
				continue
			}
			for i0 := 0; i0 < m; i0 += kn.MR {
				kn.Tile(kp, kb, min(kc, kp-kb), ap[i0/kn.MR*kn.ABlock(kp):], bp, c[i0*n+j0:], n, min(kn.MR, m-i0), min(NR, n-j0), at(from, i0*n+j0), bs)
			}
		}
	}
}

// TestTile checks every level's kernel against the float64 reference on
// bf16-rounded inputs, for shapes with edge tiles in m, n and k, k blocked
// or not, overwriting, accumulating and starting from another matrix.
func TestTile(t *testing.T) {
	for _, kn := range levels(t) {
		t.Run(kn.Level.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			for _, sh := range [][3]int{{1, 1, 1}, {8, 32, 32}, {32, 32, 32}, {7, 31, 33}, {33, 33, 63}, {40, 70, 100}, {65, 64, 256}, {31, 17, 1000}, {64, 96, 512}, {100, 64, 64}, {96, 33, 40}} {
				m, n, k := sh[0], sh[1], sh[2]
				for _, kc := range []int{Pad(k), 64} {
					for _, mode := range []int{0, 1, 2, 3, 4, 6, 8, 10} {
						load, whole, withBias, fromRes := mode&1 == 1, mode&2 == 2, mode&4 == 4, mode&8 == 8
						name := fmt.Sprintf("m%d n%d k%d kc%d load %v whole %v bias %v res %v", m, n, k, kc, load, whole, withBias, fromRes)
						a, b, c0 := randn(r, m*k), randn(r, n*k), randn(r, m*n)
						var bias, res []float32
						ref, abs := gemmRef(c0, a, b, m, n, k)
						switch {
						case fromRes: // C = res + A·Bᵀ, whatever C held
							res = randn(r, m*n)
							ref, abs = gemmRef(res, a, b, m, n, k)
						case withBias: // C starts from the bias row
							bias = randn(r, n)
							start := make([]float32, m*n)
							for i := range start {
								start[i] = bias[i%n]
							}
							ref, abs = gemmRef(start, a, b, m, n, k)
						case !load:
							ref, abs = gemmRef(make([]float32, m*n), a, b, m, n, k)
						}
						c := append([]float32(nil), c0...)
						src := res
						if load {
							src = c
						}
						resCopy := slices.Clone(res)
						gemmFrom(kn, c, src, a, b, bias, m, n, k, kc, whole)
						if !slices.Equal(res, resCopy) {
							t.Fatalf("%s: the kernel wrote to its source", name)
						}
						for i := range c {
							if d := math.Abs(float64(c[i]) - ref[i]); !(d <= tol(abs[i], k)) {
								t.Fatalf("%s: c[%d] = %v, reference %v, bound %v", name, i, c[i], ref[i], tol(abs[i], k))
							}
						}
					}
				}
			}
		})
	}
}

// TestTileCorner checks that an edge tile writes only its mr×nr corner,
// over one row block and over several (the AVX512-BF16 kernel loops over
// its 8-row blocks itself).
func TestTileCorner(t *testing.T) {
	for _, kn := range levels(t) {
		const kp, ldc = 64, 40
		rows := 3 * kn.MR
		r := rand.New(rand.NewPCG(5, 6))
		a, b := make([]uint16, 3*kn.ABlock(kp)), make([]uint16, BPanel(kp))
		for i := range a {
			a[i] = FromFloat32(float32(r.NormFloat64()))
		}
		for i := range b {
			b[i] = FromFloat32(float32(r.NormFloat64()))
		}
		bias := randn(r, NR)
		for _, mn := range [][2]int{{1, 1}, {kn.MR - 1, 17}, {3, 16}, {kn.MR, NR - 1}, {2, NR},
			{kn.MR + 3, 20}, {2*kn.MR + 1, NR}, {3*kn.MR - 1, 5}, {3 * kn.MR, 16}} {
			mr, nr := mn[0], mn[1]
			c, src := make([]float32, rows*ldc), make([]float32, rows*ldc)
			for i := range c {
				c[i], src[i] = -7, 3
			}
			for _, from := range [][]float32{nil, c[:(mr-1)*ldc+nr], src[:(mr-1)*ldc+nr]} {
				kn.Tile(kp, 0, kp, a, b, c[:(mr-1)*ldc+nr], ldc, mr, nr, from, bias[:nr])
			}
			for i, v := range src {
				if v != 3 {
					t.Fatalf("%s: mr %d nr %d: the kernel wrote src[%d]", kn.Level, mr, nr, i)
				}
			}
			for i := 0; i < rows; i++ {
				for j := 0; j < ldc; j++ {
					in := i < mr && j < nr
					if v := c[i*ldc+j]; (v == -7) == in {
						t.Errorf("%s: mr %d nr %d: c[%d][%d] = %v (inside the corner: %v)", kn.Level, mr, nr, i, j, v, in)
					}
				}
			}
		}
	}
}

func randn(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64())
	}
	return out
}

// TestBest checks the level choice: the best level this CPU runs, capped
// by SYNTHGEN_BF16.
func TestBest(t *testing.T) {
	t.Setenv(EnvBF16, "")
	l, err := Best(AMX)
	t.Logf("best bf16 level here: %s (%v)", l, err)
	if err == nil && Available(l) != nil {
		t.Errorf("Best chose %s, which cannot run", l)
	}
	t.Setenv(EnvBF16, "avx512bf16")
	if l, _ := Best(AMX); l == AMX {
		t.Errorf("SYNTHGEN_BF16=avx512bf16 chose AMX")
	}
	t.Setenv(EnvBF16, "none")
	if l, err := Best(AMX); l != None || !errors.Is(err, ErrNoFeature) {
		t.Errorf("SYNTHGEN_BF16=none: %s, %v", l, err)
	}
	t.Setenv(EnvBF16, "fp8")
	if _, err := Best(AMX); err == nil {
		t.Errorf("SYNTHGEN_BF16=fp8 gave no error")
	}
	t.Setenv(EnvBF16, "")
	if l, _ := Best(AVX512BF16); l == AMX {
		t.Errorf("limit AVX512BF16 chose AMX")
	}
	// Float32 kernels below AVX-512 (SYNTHGEN_ISA=avx2) allow no bf16.
	for _, isa := range []kernels.ISA{kernels.Go, kernels.AVX2} {
		if l, err := ForISA(isa); l != None || !errors.Is(err, ErrNoFeature) {
			t.Errorf("ForISA(%s) = %s, %v; want none", isa, l, err)
		}
	}
}

// TestPackTransposed checks PackAT and PackBT (pairs of rows interleaved
// with AVX512-BF16 where the CPU has it), and PackB of rows contiguous in
// p, bit for bit against PackA and PackB reading the same operands
// through strides, with edges in every
// dimension and p ranges split across calls; and that the blocks' tails
// (rows or columns past the edge, p past k) come out zero over garbage.
func TestPackTransposed(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, kn := range levels(t) {
		for _, sh := range [][2]int{{1, 1}, {7, 3}, {33, 31}, {40, 64}, {100, 65}, {16, 130}, {9, 512}, {35, 1100}, {5, 301}} {
			rows, kk := sh[0], sh[1]
			kp := Pad(kk)
			ld := rows + 3
			src := randn(r, kk*ld)
			for i := range src {
				if r.IntN(7) == 0 { // ties
					src[i] = math.Float32frombits(math.Float32bits(src[i])&0xffff0000 | 0x8000)
				}
			}
			tmp := make([]uint16, PairsLen(rows))
			// A: blocks of MR rows, A(i, p) = src[p·ld + i].
			blocks := (rows + kn.MR - 1) / kn.MR
			want := make([]uint16, blocks*kn.ABlock(kp))
			for b := 0; b < blocks; b++ {
				kn.PackA(want[b*kn.ABlock(kp):], src, 1, ld, b*kn.MR, rows, kk, kp)
			}
			got := make([]uint16, len(want))
			for i := range got {
				got[i] = 0xdead
			}
			for p0 := 0; p0 < kp; p0 += 64 {
				kn.PackAT(got, src, ld, rows, kk, kp, p0, min(p0+64, kp), tmp)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: PackAT %d rows, k %d differs from PackA", kn.Level, rows, kk)
			}
			// B: panels of NR columns, B(j, p) = src[p·ld + j].
			panels := (rows + NR - 1) / NR
			wantB := make([]uint16, panels*BPanel(kp))
			for jp := 0; jp < panels; jp++ {
				PackB(wantB[jp*BPanel(kp):], src, 1, ld, jp*NR, rows, kk, kp)
			}
			gotB := make([]uint16, len(wantB))
			for i := range gotB {
				gotB[i] = 0xdead
			}
			for p0 := 0; p0 < kp; p0 += 32 {
				PackBT(gotB, src, ld, rows, kk, kp, p0, min(p0+32, kp), tmp)
			}
			if !slices.Equal(gotB, wantB) {
				t.Errorf("%s: PackBT %d columns, k %d differs from PackB", kn.Level, rows, kk)
			}
			// B with its rows contiguous in p (cs 1, PackB's AVX512-BF16
			// path), B(j, p) = srcT[j·ldT + p], the same values,
			// over garbage.
			ldT := kk + 5
			srcT := make([]float32, rows*ldT)
			for j := 0; j < rows; j++ {
				for p := 0; p < kk; p++ {
					srcT[j*ldT+p] = src[p*ld+j]
				}
			}
			for i := range gotB {
				gotB[i] = 0xdead
			}
			for jp := 0; jp < panels; jp++ {
				PackB(gotB[jp*BPanel(kp):], srcT, ldT, 1, jp*NR, rows, kk, kp)
			}
			if !slices.Equal(gotB, wantB) {
				t.Errorf("%s: PackB of rows contiguous in p, %d columns, k %d, differs from PackB through strides", kn.Level, rows, kk)
			}
		}
	}
}

// TestPairRows checks the interleaving bit for bit against FromFloat32 at
// every length 0–70 and that nothing past 2n is written.
func TestPairRows(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for n := 0; n <= 70; n++ {
		src := randn(r, 2*n+1)
		dst := make([]uint16, 2*n+40)
		for i := range dst {
			dst[i] = 0xdead
		}
		pairRows(dst[:2*n], src[:n], src, n, true)
		for j := 0; j < n; j++ {
			if dst[2*j] != FromFloat32(src[j]) || dst[2*j+1] != FromFloat32(src[n+j]) {
				t.Fatalf("n=%d: pair %d = %#04x %#04x, want %#04x %#04x", n, j, dst[2*j], dst[2*j+1], FromFloat32(src[j]), FromFloat32(src[n+j]))
			}
		}
		for i := 2 * n; i < len(dst); i++ {
			if dst[i] != 0xdead {
				t.Fatalf("n=%d: wrote past dst at %d", n, i)
			}
		}
	}
}

// TestPackBRows checks PackB's path for rows contiguous in p (cs 1,
// converted a step at a time with AVX512-BF16 where the CPU has it) bit
// for bit against PackB reading the same B through strides, with edges in
// both dimensions (the last panel part empty, k off multiples of Step)
// over garbage.
func TestPackBRows(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, sh := range [][2]int{{1, 1}, {7, 3}, {33, 31}, {40, 64}, {100, 65}, {32, 130}, {9, 512}, {35, 1100}} {
		n, kk := sh[0], sh[1]
		kp := Pad(kk)
		src := randn(r, n*kk)
		for i := range src {
			if r.IntN(7) == 0 { // ties
				src[i] = math.Float32frombits(math.Float32bits(src[i])&0xffff0000 | 0x8000)
			}
		}
		ld := n + 3 // B(j, p) = srcT[p·ld + j]
		srcT := make([]float32, kk*ld)
		for j := 0; j < n; j++ {
			for p := 0; p < kk; p++ {
				srcT[p*ld+j] = src[j*kk+p]
			}
		}
		for j0 := 0; j0 < n; j0 += NR {
			want := make([]uint16, BPanel(kp))
			PackB(want, srcT, 1, ld, j0, n, kk, kp)
			got := make([]uint16, BPanel(kp))
			for i := range got {
				got[i] = 0xdead
			}
			PackB(got, src, kk, 1, j0, n, kk, kp)
			if !slices.Equal(got, want) {
				t.Errorf("PackB of rows, %d columns from %d, k %d, differs from PackB through strides", n, j0, kk)
			}
		}
	}
}

// TestScaleAdd: Kernel.ScaleAdd gives the Go products' and sums' bits at
// every level, with and without b, at every length up to 70 (the kernel's
// 32, 16 and masked steps), touching nothing past the slice.
func TestScaleAdd(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 1))
	for _, l := range []Level{Go, AVX512BF16, AMX} {
		k, err := New(l)
		if err != nil {
			t.Logf("%s: skipped: %v", l, err)
			continue
		}
		for _, add := range []bool{false, true} {
			for n := 0; n <= 70; n++ {
				buf, b := make([]float32, n+5), make([]float32, n+5)
				for i := range buf {
					buf[i] = float32(r.NormFloat64() * 1e3)
					b[i] = float32(r.NormFloat64() * 1e3)
				}
				buf[0] = float32(math.Inf(-1))
				if n > 2 {
					buf[n-1] = 0x1p-140 // subnormal
				}
				want := slices.Clone(buf)
				for i := range want[:n] {
					want[i] = float32(want[i] * 0.3)
					if add {
						want[i] += float32(-1.7 * b[i])
					}
				}
				var bs []float32
				if add {
					bs = b
				}
				k.ScaleAdd(buf[:n], 0.3, bs, -1.7)
				for i := range buf {
					if math.Float32bits(buf[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s add=%v n=%d: element %d is %g, want %g", l, add, n, i, buf[i], want[i])
					}
				}
			}
		}
	}
}

// TestTileRow: TileRow gives, at every level, the bits of one Tile per
// panel (the AMX level's one call along the row block sums each tile as
// Tile does), for row counts and widths on and off the blocks and panels,
// at inner offsets into the packed depth, overwriting only C's mr×n
// corner.
func TestTileRow(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 4))
	const kp, ldc = 96, 140
	for _, k := range levels(t) {
		for _, mr := range []int{1, 7, 8, 31, 32} {
			for _, n := range []int{1, 31, 32, 33, 64, 100, 128} {
				for _, kb := range []int{0, 32} {
					kl := kp - kb
					a := make([]uint16, (mr+k.MR-1)/k.MR*k.ABlock(kp))
					for i := range a {
						a[i] = FromFloat32(float32(r.NormFloat64()))
					}
					panels := (n + NR - 1) / NR
					b := make([]uint16, panels*BPanel(kp))
					for i := range b {
						b[i] = FromFloat32(float32(r.NormFloat64()))
					}
					got, want := make([]float32, mr*ldc), make([]float32, mr*ldc)
					for i := range got {
						got[i], want[i] = -3, -3
					}
					k.TileRow(kp, kb, kl, a, b, got, ldc, mr, n)
					for j := 0; j < n; j += NR {
						k.Tile(kp, kb, kl, a, b[j/NR*BPanel(kp):], want[j:], ldc, mr, min(NR, n-j), nil, nil)
					}
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s mr=%d n=%d kb=%d: C[%d][%d] = %v, Tile per panel %v", k.Level, mr, n, kb, i/ldc, i%ldc, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
