// Package bf16 holds the bf16 GEMM micro-kernels of mixed-precision
// training: the linear layers' products with bf16 operands (rounded to
// nearest even) and float32 accumulation and output. runtime/mat drives
// them (Engine.SetBF16); this package holds the levels, the packed
// layouts and the kernels.
//
// Levels, best first: AMX (TDPBF16PS on 2×2 tiles of 16×16 float32
// accumulators, tile state configured and released inside each call),
// AVX512-BF16 (VDPBF16PS on an 8×32 register tile, K masks at the edges),
// and Go (float32 arithmetic on the bf16 values, for tests and CPUs with
// neither; training on such a CPU stays float32). The assembly is generated
// by gen/bf16gemm, its bf16 instructions encoded by gen/x86enc; it never
// runs on a CPU without the feature: Available checks the CPU (and asks
// Linux once for the AMX tile state) before a kernel is handed out.
//
// # Layouts
//
// The inner dimension k is padded with zeros to a multiple of 32 (Pad).
// B (n × k, B(j, p)) is packed into panels of NR = 32 columns: per 32-deep
// step two halves of 16 columns, each 16 rows q of 16 pairs (B(j, 2q),
// B(j, 2q+1)): 1024 bf16 per step and panel (PackB). A (m × k) is packed
// into blocks of MR rows: for AMX (MR 32) row-major, k padded bf16 per
// row; for the others (MR 8) with each q's pairs of the MR rows together,
// 2·MR bf16 per q (PackA).
package bf16

//go:generate go run ../../gen/bf16gemm -dir .

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// Level is a bf16 kernel level.
type Level int

// The levels, lowest first.
const (
	None       Level = iota // no bf16 kernel: products stay float32
	Go                      // pure Go on bf16 values (tests, fallback)
	AVX512BF16              // VDPBF16PS
	AMX                     // AMX-TILE and AMX-BF16
)

func (l Level) String() string {
	switch l {
	case None:
		return "none"
	case Go:
		return "go"
	case AVX512BF16:
		return "avx512bf16"
	case AMX:
		return "amx"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// ParseLevel reads a level as SYNTHGEN_BF16 spells it (String's names).
func ParseLevel(s string) (Level, error) {
	for _, l := range []Level{None, Go, AVX512BF16, AMX} {
		if strings.EqualFold(strings.TrimSpace(s), l.String()) {
			return l, nil
		}
	}
	return 0, fmt.Errorf("unknown bf16 level %q (want amx, avx512bf16, go or none)", s)
}

// ErrNoFeature is wrapped by the errors of levels this CPU, OS or build
// cannot run.
var ErrNoFeature = errors.New("feature not available")

// Available returns nil when level l's kernel runs here; otherwise an
// error wrapping ErrNoFeature says why. For AMX it asks the OS once for
// the tile state.
func Available(l Level) error {
	switch l {
	case Go:
		return nil
	case AVX512BF16:
		return hasAVX512BF16()
	case AMX:
		return hasAMX()
	}
	return fmt.Errorf("bf16 level %s has no kernel: %w", l, ErrNoFeature)
}

// EnvBF16 is the environment variable that caps the bf16 level (amx,
// avx512bf16, go, none), as SYNTHGEN_ISA caps the float32 kernels'.
const EnvBF16 = "SYNTHGEN_BF16"

// Best returns the best hardware level at most limit that runs here (AMX,
// then AVX512-BF16), or None with the reasons the others cannot run. The
// Go level is never chosen: on CPUs without bf16 instructions float32 is
// faster. limit is further capped by SYNTHGEN_BF16 when set.
func Best(limit Level) (Level, error) {
	if v, ok := os.LookupEnv(EnvBF16); ok && strings.TrimSpace(v) != "" {
		l, err := ParseLevel(v)
		if err != nil {
			return None, fmt.Errorf("%s: %w", EnvBF16, err)
		}
		limit = min(limit, l)
	}
	var why []string
	for _, l := range []Level{AMX, AVX512BF16} {
		if l > limit {
			why = append(why, fmt.Sprintf("%s: capped at %s", l, limit))
			continue
		}
		err := Available(l)
		if err == nil {
			return l, nil
		}
		why = append(why, err.Error())
	}
	return None, fmt.Errorf("no bf16 level: %s: %w", strings.Join(why, "; "), ErrNoFeature)
}

// ForISA is the bf16 level of training with float32 kernels at level isa:
// Best, or None (with the reason) when isa is below kernels.AVX512 (as
// SYNTHGEN_ISA or an explicit level may cap it), since every bf16 level
// needs AVX-512.
func ForISA(isa kernels.ISA) (Level, error) {
	if isa < kernels.AVX512 {
		return None, fmt.Errorf("the kernels run at %s, below avx512, which bf16 needs: %w", isa, ErrNoFeature)
	}
	return Best(AMX)
}

// FromFloat32 rounds f to bf16 as VCVTNEPS2BF16 does: nearest even, NaN
// kept (and quietened), denormal inputs flushed to a signed zero.
func FromFloat32(f float32) uint16 {
	u := math.Float32bits(f)
	switch {
	case u&0x7fffffff > 0x7f800000: // NaN
		return uint16(u>>16) | 0x40
	case u&0x7f800000 == 0: // zero or denormal
		return uint16(u>>16) & 0x8000
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// ToFloat32 widens a bf16 value exactly.
func ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Round returns f rounded to bf16 and widened back (FromFloat32).
func Round(f float32) float32 { return ToFloat32(FromFloat32(f)) }

// NR is the columns of a packed B panel, at every level.
const NR = 32

// Step is the inner-dimension block of one kernel step: k is padded to it.
const Step = 32

// Pad returns k rounded up to a multiple of Step.
func Pad(k int) int { return (k + Step - 1) / Step * Step }

// Kernel is a level's micro-kernel and its A layout.
type Kernel struct {
	Level Level
	MR    int  // rows of A per packed block and per call
	rowsA bool // A blocks row-major (AMX); else q-interleaved pairs
	tile  func(steps int, a []uint16, lda int, b []uint16, c []float32, ldc, mr, nr int, load bool)
}

// New returns level l's kernel, or an error wrapping ErrNoFeature when it
// cannot run here (Available).
func New(l Level) (*Kernel, error) {
	if err := Available(l); err != nil {
		return nil, err
	}
	switch l {
	case AMX:
		return &Kernel{Level: l, MR: 32, rowsA: true, tile: tileAMX}, nil
	case AVX512BF16:
		return &Kernel{Level: l, MR: 8, tile: tileAVX512}, nil
	}
	return &Kernel{Level: Go, MR: 8, tile: tileGo}, nil
}

// ABlock is the bf16 length of one packed block of A for a padded inner
// dimension kp.
func (k *Kernel) ABlock(kp int) int { return k.MR * kp }

// BPanel is the bf16 length of one packed panel of B for a padded inner
// dimension kp.
func BPanel(kp int) int { return NR * kp }

// Tile computes C (+)= A·Bᵀ on the mr×nr corner (mr ≤ MR, nr ≤ NR) of c
// (row stride ldc floats) over the inner indices [kb, kb+kl) (multiples of
// Step) of a packed A block and B panel of padded depth kp: C =
// Σ_p A(i, p)·B(j, p), added to c's values when load, else overwriting
// them. Elements of c outside the corner are neither read nor written.
func (k *Kernel) Tile(kp, kb, kl int, a, b []uint16, c []float32, ldc, mr, nr int, load bool) {
	if kb%Step != 0 || kl%Step != 0 || kl <= 0 || kb+kl > kp || mr < 1 || mr > k.MR || nr < 1 || nr > NR ||
		len(a) < k.ABlock(kp) || len(b) < BPanel(kp) || ldc < nr || len(c) < (mr-1)*ldc+nr {
		panic(fmt.Sprintf("bf16: Tile(kp %d, kb %d, kl %d, len(a) %d, len(b) %d, len(c) %d, ldc %d, mr %d, nr %d) outside the %s kernel's %d×%d contract",
			kp, kb, kl, len(a), len(b), len(c), ldc, mr, nr, k.Level, k.MR, NR))
	}
	var as []uint16
	if k.rowsA {
		as = a[kb:]
	} else {
		as = a[kb*k.MR:]
	}
	k.tile(kl/Step, as, kp, b[kb*NR:], c, ldc, mr, nr, load)
}

// tileGo is the Go level: the AVX512-BF16 layout, each pair's two
// products added to the float32 sum in order.
func tileGo(steps int, a []uint16, _ int, b []uint16, c []float32, ldc, mr, nr int, load bool) {
	const mrMax = 8
	var acc [mrMax][NR]float32
	if load {
		for i := 0; i < mr; i++ {
			copy(acc[i][:nr], c[i*ldc:i*ldc+nr])
		}
	}
	for s := 0; s < steps; s++ {
		bs := b[s*1024 : s*1024+1024]
		as := a[s*16*2*mrMax : (s+1)*16*2*mrMax]
		for q := 0; q < 16; q++ {
			for h := 0; h < 2; h++ {
				bq := bs[h*512+q*32 : h*512+q*32+32]
				for i := 0; i < mr; i++ {
					a0, a1 := ToFloat32(as[(q*mrMax+i)*2]), ToFloat32(as[(q*mrMax+i)*2+1])
					row := &acc[i]
					for j := 0; j < 16; j++ {
						row[h*16+j] += a0*ToFloat32(bq[2*j]) + a1*ToFloat32(bq[2*j+1])
					}
				}
			}
		}
	}
	for i := 0; i < mr; i++ {
		copy(c[i*ldc:i*ldc+nr], acc[i][:nr])
	}
}

// PackB packs columns j0 ≤ j < j0+32 (those < n; the rest zero) of B,
// B(j, p) = src[j·rs + p·cs] for p < k (zero up to kp = Pad(k)), into one
// panel dst (BPanel(kp) long).
func PackB(dst []uint16, src []float32, rs, cs, j0, n, k, kp int) {
	dst = dst[:BPanel(kp)]
	cols := min(NR, n-j0)
	for s := 0; s < kp/Step; s++ {
		d := dst[s*1024 : s*1024+1024]
		for h := 0; h < 2; h++ {
			for jj := 0; jj < 16; jj++ {
				j := h*16 + jj
				for q := 0; q < 16; q++ {
					p := s*Step + 2*q
					var x0, x1 uint16
					if j < cols {
						if p < k {
							x0 = FromFloat32(src[(j0+j)*rs+p*cs])
						}
						if p+1 < k {
							x1 = FromFloat32(src[(j0+j)*rs+(p+1)*cs])
						}
					}
					d[h*512+q*32+2*jj] = x0
					d[h*512+q*32+2*jj+1] = x1
				}
			}
		}
	}
}

// PackA packs rows i0 ≤ i < i0+MR (those < m; the rest zero) of A, A(i, p)
// = src[i·rs + p·cs] for p < k (zero up to kp = Pad(k)), into one block
// dst (ABlock(kp) long) in the kernel's layout.
func (k *Kernel) PackA(dst []uint16, src []float32, rs, cs, i0, m, kk, kp int) {
	mr := k.MR
	dst = dst[:mr*kp]
	rows := min(mr, m-i0)
	if k.rowsA {
		for r := 0; r < mr; r++ {
			d := dst[r*kp : r*kp+kp]
			if r >= rows {
				clear(d)
				continue
			}
			if cs == 1 {
				convert(d[:kk], src[(i0+r)*rs:(i0+r)*rs+kk])
			} else {
				for p := 0; p < kk; p++ {
					d[p] = FromFloat32(src[(i0+r)*rs+p*cs])
				}
			}
			clear(d[kk:])
		}
		return
	}
	for p := 0; p < kp; p++ {
		q, odd := p/2, p%2
		for r := 0; r < mr; r++ {
			var x uint16
			if r < rows && p < kk {
				x = FromFloat32(src[(i0+r)*rs+p*cs])
			}
			dst[(q*mr+r)*2+odd] = x
		}
	}
}

// convert rounds src into dst (same length), with AVX512-BF16 where the
// CPU has it.
func convert(dst []uint16, src []float32) {
	if len(src) == 0 {
		return
	}
	if hasAVX512BF16() == nil {
		toBF16AVX512(&dst[0], &src[0], len(src))
		return
	}
	for i, f := range src {
		dst[i] = FromFloat32(f)
	}
}
