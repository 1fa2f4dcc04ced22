package bf16proof

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

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
		{0xff800000, 0xff80}, // -Inf
		{0x7f800001, 0x7fc0}, // signalling NaN quietened
		{0xffc00000, 0xffc0}, // quiet NaN kept
		{0x00000001, 0x0000}, // denormal flushed
		{0x807fffff, 0x8000}, // negative denormal flushed, sign kept
		{0x00800000, 0x0080}, // smallest normal
	} {
		if got := FromFloat32(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("FromFloat32(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

// withLevel runs f with the AVX512-BF16 kernels on (where this CPU has
// them) and off, naming the level in the subtest.
func withLevel(t *testing.T, f func(t *testing.T)) {
	saved := HasAVX512BF16
	defer func() { HasAVX512BF16 = saved }()
	if saved {
		t.Run("avx512bf16", f)
	} else {
		t.Logf("AVX512-BF16 kernels not run: CPU lacks AVX512-BF16/AVX512BW or the build is purego/non-amd64")
	}
	HasAVX512BF16 = false
	t.Run("go", f)
}

func randomBits(r *rand.Rand) float32 {
	switch r.IntN(4) {
	case 0:
		return math.Float32frombits(r.Uint32()) // every class: NaN, Inf, denormal
	case 1: // ties and near-ties
		return math.Float32frombits(r.Uint32()&0xffff0000 | []uint32{0x8000, 0x7fff, 0x8001, 0}[r.IntN(4)])
	}
	return float32(r.NormFloat64())
}

// TestConvertBF16 compares the conversion bit for bit with FromFloat32 for
// every length 0–130 (all tail paths) and checks nothing is written past
// dst.
func TestConvertBF16(t *testing.T) {
	withLevel(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for n := 0; n <= 130; n++ {
			src := make([]float32, n)
			for i := range src {
				src[i] = randomBits(r)
			}
			buf := make([]uint16, n+40)
			for i := range buf {
				buf[i] = 0xdead
			}
			if err := ConvertBF16(buf[:n], src); err != nil {
				t.Fatal(err)
			}
			for i, f := range src {
				if want := FromFloat32(f); buf[i] != want {
					t.Fatalf("n=%d: dst[%d] = %#04x, want %#04x (src %#08x)", n, i, buf[i], want, math.Float32bits(f))
				}
			}
			for i := n; i < len(buf); i++ {
				if buf[i] != 0xdead {
					t.Fatalf("n=%d: wrote past dst at %d", n, i)
				}
			}
		}
	})
	if err := ConvertBF16(make([]uint16, 3), make([]float32, 4)); err == nil {
		t.Error("ConvertBF16 with different lengths gave no error")
	}
}

func randomBF16(r *rand.Rand, n int) []uint16 {
	out := make([]uint16, n)
	for i := range out {
		out[i] = FromFloat32(float32(r.NormFloat64()))
	}
	return out
}

// near checks got against the float64 value ref of a sum of terms terms
// whose absolute values sum to abs: float32 accumulation of exact
// products (bf16·bf16 is exact in float32) errs by at most about
// terms·2⁻²⁴·abs; the bound allows twice that.
func near(got float32, ref, abs float64, terms int) bool {
	return math.Abs(float64(got)-ref) <= 2*float64(terms+1)*0x1p-24*abs+1e-30
}

func TestDotBF16(t *testing.T) {
	withLevel(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		for _, n := range []int{0, 1, 31, 32, 33, 64, 95, 96, 128, 1000, 4096} {
			a, b := randomBF16(r, n), randomBF16(r, n)
			var ref, abs float64
			var ref32 float32
			for i := range a {
				p := float64(ToFloat32(a[i])) * float64(ToFloat32(b[i]))
				ref += p
				abs += math.Abs(p)
				ref32 += ToFloat32(a[i]) * ToFloat32(b[i])
			}
			got, err := DotBF16(a, b)
			if err != nil {
				t.Fatal(err)
			}
			if !near(got, ref, abs, n) {
				t.Errorf("n=%d: DotBF16 = %v, float64 reference %v (float32 sequential %v), bound %v", n, got, ref, ref32, 2*float64(n+1)*0x1p-24*abs)
			}
		}
	})
}

func refGemm(c []float32, a, b []uint16, m, n, k int) (ref, abs []float64) {
	ref, abs = make([]float64, m*n), make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			s, sa := float64(c[i*n+j]), math.Abs(float64(c[i*n+j]))
			for p := 0; p < k; p++ {
				x := float64(ToFloat32(a[i*k+p])) * float64(ToFloat32(b[p*n+j]))
				s += x
				sa += math.Abs(x)
			}
			ref[i*n+j], abs[i*n+j] = s, sa
		}
	}
	return ref, abs
}

func skipWithoutAMX(t testing.TB) {
	if err := AMX(); err != nil {
		if !errors.Is(err, ErrNoFeature) {
			t.Fatalf("AMX() error does not wrap ErrNoFeature: %v", err)
		}
		t.Skipf("AMX kernels not run: %v", err)
	}
}

func TestTileMatmul(t *testing.T) {
	skipWithoutAMX(t)
	r := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 20; trial++ {
		var c [256]float32
		for i := range c {
			c[i] = float32(r.NormFloat64())
		}
		a, b := randomBF16(r, 16*32), randomBF16(r, 32*16)
		bp, err := PackB(b, 32, 16)
		if err != nil {
			t.Fatal(err)
		}
		ref, abs := refGemm(c[:], a, b, 16, 16, 32)
		if err := TileMatmul(&c, (*[512]uint16)(a), (*[512]uint16)(bp)); err != nil {
			t.Fatal(err)
		}
		for i := range c {
			if !near(c[i], ref[i], abs[i], 33) {
				t.Fatalf("trial %d: C[%d][%d] = %v, reference %v", trial, i/16, i%16, c[i], ref[i])
			}
		}
	}
}

func gemmCase(r *rand.Rand, k int) (c []float32, a, b, bp []uint16) {
	c = make([]float32, 32*32)
	for i := range c {
		c[i] = float32(r.NormFloat64())
	}
	a, b = randomBF16(r, 32*k), randomBF16(r, k*32)
	bp, err := PackB(b, k, 32)
	if err != nil {
		panic(err)
	}
	return c, a, b, bp
}

func TestGemm32(t *testing.T) {
	skipWithoutAMX(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, k := range []int{32, 64, 96, 320, 1024} {
		c, a, b, bp := gemmCase(r, k)
		ref, abs := refGemm(c, a, b, 32, 32, k)
		if err := Gemm32(c, a, bp, k); err != nil {
			t.Fatal(err)
		}
		for i := range c {
			if !near(c[i], ref[i], abs[i], k+1) {
				t.Fatalf("k=%d: C[%d][%d] = %v, reference %v", k, i/32, i%32, c[i], ref[i])
			}
		}
	}
	if err := Gemm32(make([]float32, 1024), make([]uint16, 32*48), make([]uint16, 32*48), 48); err == nil {
		t.Error("Gemm32 with k=48 gave no error")
	}
}

func TestPackB(t *testing.T) {
	b := make([]uint16, 64*32)
	for i := range b {
		b[i] = uint16(i)
	}
	p, err := PackB(b, 64, 32)
	if err != nil {
		t.Fatal(err)
	}
	// block 1 (rows 32–63), tile 1 (cols 16–31), pair row 3, column 5:
	// B[32+6][21] then B[32+7][21].
	off := (1*2+1)*512 + 3*32 + 2*5
	if p[off] != b[38*32+21] || p[off+1] != b[39*32+21] {
		t.Errorf("PackB pair = %d,%d, want %d,%d", p[off], p[off+1], b[38*32+21], b[39*32+21])
	}
	if _, err := PackB(b, 48, 32); err == nil {
		t.Error("PackB with k=48 gave no error")
	}
}

func TestGemm4x32(t *testing.T) {
	if !HasAVX512BF16 {
		t.Skip("AVX512-BF16 kernels not run: CPU lacks AVX512-BF16/AVX512BW or the build is purego/non-amd64")
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, k := range []int{32, 64, 160, 1024} {
		c := make([]float32, 4*32)
		for i := range c {
			c[i] = float32(r.NormFloat64())
		}
		a, b := randomBF16(r, 4*k), randomBF16(r, k*32)
		bp, err := PackB(b, k, 32)
		if err != nil {
			t.Fatal(err)
		}
		ref, abs := refGemm(c, a, b, 4, 32, k)
		if err := Gemm4x32(c, a, bp, k); err != nil {
			t.Fatal(err)
		}
		for i := range c {
			if !near(c[i], ref[i], abs[i], k+1) {
				t.Fatalf("k=%d: C[%d][%d] = %v, reference %v", k, i/32, i%32, c[i], ref[i])
			}
		}
	}
	if err := Gemm4x32(make([]float32, 128), make([]uint16, 4*16), make([]uint16, 32*16), 16); err == nil {
		t.Error("Gemm4x32 with k=16 gave no error")
	}
}
