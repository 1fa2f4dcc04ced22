// Package bf16 holds the bf16 GEMM micro-kernels of mixed-precision
// training: the linear layers' products (and aft_full's, and random's
// attention products) with bf16 operands (rounded to nearest even) and
// float32 accumulation and output.
// runtime/mat drives them (Engine.SetBF16); this package holds the levels,
// the packed layouts and the kernels.
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
// into blocks of MR rows (32 for AMX, 8 for the others), row-major, kp
// bf16 per row (PackA, or PackAT for a transposed A).
package bf16

//go:generate go run ../../gen/bf16gemm

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"unsafe"

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
	MR    int // rows of A per packed block and per call
	tile  func(steps int, a []uint16, lda int, b []uint16, c []float32, ldc, mr, nr int, src, bias []float32)
}

// New returns level l's kernel, or an error wrapping ErrNoFeature when it
// cannot run here (Available).
func New(l Level) (*Kernel, error) {
	if err := Available(l); err != nil {
		return nil, err
	}
	switch l {
	case AMX:
		return &Kernel{Level: l, MR: 32, tile: tileAMX}, nil
	case AVX512BF16:
		return &Kernel{Level: l, MR: 8, tile: tileAVX512}, nil
	}
	return &Kernel{Level: Go, MR: 8, tile: tileGo}, nil
}

// ScaleAdd sets c[j] = s·c[j] + u·b[j] (b nil: c[j] = s·c[j]), float32
// products and a float32 sum an element, never fused (the same bits at
// every level): with AVX-512 at the AMX and AVX512-BF16 levels, whose CPUs
// have it, in Go at the Go level. b, when not nil, is at least as long as c.
func (k *Kernel) ScaleAdd(c []float32, s float32, b []float32, u float32) {
	if len(c) == 0 {
		return
	}
	if b != nil {
		b = b[:len(c)]
	}
	if k.Level != Go {
		var bp *float32
		if b != nil {
			bp = &b[0]
		}
		scaleAddAVX512(&c[0], len(c), s, bp, u)
		return
	}
	if b == nil {
		for i := range c {
			c[i] *= s
		}
		return
	}
	for i := range c {
		c[i] = float32(c[i]*s) + float32(u*b[i])
	}
}

// LDA is the row stride, in bf16, of a packed block of A for a padded
// inner dimension kp: kp, plus 32 when kp is a multiple of 512 (rows 1 KiB
// or a multiple of it apart fall into few cache sets).
func LDA(kp int) int {
	if kp%512 == 0 {
		return kp + 32
	}
	return kp
}

// ABlock is the bf16 length of one packed block of A for a padded inner
// dimension kp.
func (k *Kernel) ABlock(kp int) int { return k.MR * LDA(kp) }

// BPanel is the bf16 length of one packed panel of B for a padded inner
// dimension kp.
func BPanel(kp int) int { return NR * kp }

// Tile computes C = S + A·Bᵀ on the mr×nr corner (nr ≤ NR; mr rows, in
// ⌈mr/MR⌉ tiles) of c (row stride ldc floats) over the inner indices [kb,
// kb+kl) (multiples of Step) of packed A blocks (back to back, ABlock(kp)
// each) and a B panel of padded depth kp: C(i, j) = S(i, j) + Σ_p A(i,
// p)·B(j, p). S is src's corner (laid out as c's, row stride ldc; src may
// be c itself, which adds to C), or when src is nil the row bias[j] (nil:
// zero). Elements of c outside the corner are neither read nor written.
func (k *Kernel) Tile(kp, kb, kl int, a, b []uint16, c []float32, ldc, mr, nr int, src, bias []float32) {
	tiles := (mr + k.MR - 1) / k.MR
	if kb%Step != 0 || kl%Step != 0 || kl <= 0 || kb+kl > kp || mr < 1 || nr < 1 || nr > NR ||
		len(a) < tiles*k.ABlock(kp) || len(b) < BPanel(kp) || ldc < nr || len(c) < (mr-1)*ldc+nr ||
		src != nil && len(src) < (mr-1)*ldc+nr || bias != nil && len(bias) < nr {
		panic(fmt.Sprintf("bf16: Tile(kp %d, kb %d, kl %d, len(a) %d, len(b) %d, len(c) %d, ldc %d, mr %d, nr %d, len(src) %d, len(bias) %d) outside the %s kernel's %d×%d contract",
			kp, kb, kl, len(a), len(b), len(c), ldc, mr, nr, len(src), len(bias), k.Level, k.MR, NR))
	}
	if src != nil {
		bias = nil
	}
	k.tile(kl/Step, a[kb:], LDA(kp), b[kb*NR:], c, ldc, mr, nr, src, bias)
}

// TileRow is Tile along a row block: C[mr×n] (row stride ldc) = A·Bᵀ
// over the inner indices [kb, kb+kl) of a padded inner dimension kp, for
// the mr rows of a's blocks and the n columns of the ⌈n/NR⌉ panels of b
// (BPanel(kp) apart), overwriting C. At the AMX level a block of 32 rows
// takes one call for all its whole panels.
func (k *Kernel) TileRow(kp, kb, kl int, a, b []uint16, c []float32, ldc, mr, n int) {
	ps := BPanel(kp)
	panels := (n + NR - 1) / NR
	if n < 1 || len(b) < panels*ps || ldc < n || len(c) < (mr-1)*ldc+n {
		panic(fmt.Sprintf("bf16: TileRow(kp %d, len(b) %d, len(c) %d, ldc %d, mr %d, n %d) outside its contract", kp, len(b), len(c), ldc, mr, n))
	}
	j := 0
	if k.Level == AMX && mr == 32 && n >= NR {
		// Tile's checks for the first panel and A; the rest as above.
		k.Tile(kp, kb, kl, a, b, c, ldc, mr, NR, nil, nil) // panel 0
		if whole := n / NR; whole > 1 {
			rowAMX(kl/Step, a[kb:], LDA(kp), b[ps+kb*NR:], ps, c[NR:], ldc, whole-1)
		}
		j = n / NR * NR
	}
	for ; j < n; j += NR {
		k.Tile(kp, kb, kl, a, b[j/NR*ps:], c[j:], ldc, mr, min(NR, n-j), nil, nil)
	}
}

// tileGo is the Go level: each pair's two products added to the float32
// sum in order, a tile of 8 rows at a time.
func tileGo(steps int, a []uint16, lda int, b []uint16, c []float32, ldc, mr, nr int, src, bias []float32) {
	for i0 := 0; i0 < mr; i0 += 8 {
		var s []float32
		if src != nil {
			s = src[i0*ldc:]
		}
		tileGo8(steps, a[i0*lda:], lda, b, c[i0*ldc:], ldc, min(8, mr-i0), nr, s, bias)
	}
}

func tileGo8(steps int, a []uint16, lda int, b []uint16, c []float32, ldc, mr, nr int, src, bias []float32) {
	var acc [8][NR]float32
	for i := 0; i < mr; i++ {
		switch {
		case src != nil:
			copy(acc[i][:nr], src[i*ldc:i*ldc+nr])
		case bias != nil:
			copy(acc[i][:nr], bias[:nr])
		}
	}
	for s := 0; s < steps; s++ {
		bs := b[s*1024 : s*1024+1024]
		for i := 0; i < mr; i++ {
			ar := a[i*lda+s*Step : i*lda+s*Step+Step]
			row := &acc[i]
			for q := 0; q < 16; q++ {
				a0, a1 := ToFloat32(ar[2*q]), ToFloat32(ar[2*q+1])
				for h := 0; h < 2; h++ {
					bq := bs[h*512+q*32 : h*512+q*32+32]
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
//
// Columns contiguous in p (cs 1) are converted with AVX512-BF16 where the
// CPU has it, 16 columns and a step (32 values, 16 pairs each) a call,
// their pairs transposed into the panel in registers (packBHalfAVX512).
func PackB(dst []uint16, src []float32, rs, cs, j0, n, k, kp int) {
	dst = dst[:BPanel(kp)]
	cols := min(NR, n-j0)
	if cs == 1 && hasAVX512BF16() == nil {
		for s := 0; s < kp/Step; s++ {
			p0 := s * Step
			nv := min(Step, k-p0)
			for h := 0; h < 2; h++ {
				d := dst[s*1024+h*512 : s*1024+h*512+512]
				rows := min(max(cols-h*16, 0), 16)
				if rows == 0 || nv <= 0 {
					clear(d)
					continue
				}
				first := (j0+h*16)*rs + p0
				_ = src[first+(rows-1)*rs+nv-1] // the last float read
				packBHalfAVX512(&d[0], &src[first], rs, rows, nv)
			}
		}
		return
	}
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
// dst (ABlock(kp) long): row-major, LDA(kp) bf16 apart. Rows contiguous in p
// (cs 1) are converted with AVX512-BF16 where the CPU has it; a transposed
// A (rs 1) packs faster with PackAT.
func (k *Kernel) PackA(dst []uint16, src []float32, rs, cs, i0, m, kk, kp int) {
	lda := LDA(kp)
	dst = dst[:k.MR*lda]
	k.PackASeg(dst, lda, 0, src, rs, cs, i0, m, kk, kp)
	for r := 0; r < k.MR; r++ { // the rows' padding
		clear(dst[r*lda+kp : r*lda+lda])
	}
}

// PackASeg is PackA into one segment of an inner dimension concatenated
// from several operands (each padded to a multiple of Step): it writes
// A(i, p) at column off+p of a block whose MR rows are lda bf16 apart, for
// p < kp (zero from kk), off a multiple of Step and off+kp ≤ lda. Nothing
// outside those columns is written.
func (k *Kernel) PackASeg(dst []uint16, lda, off int, src []float32, rs, cs, i0, m, kk, kp int) {
	mr := k.MR
	dst = dst[:(mr-1)*lda+off+kp]
	rows := min(mr, m-i0)
	for r := 0; r < mr; r++ {
		d := dst[r*lda+off : r*lda+off+kp]
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
}

// PackAT packs the inner indices p0 ≤ p < p1 (p0 and p1 multiples of
// Step, or p1 = kp) of a transposed A, A(i, p) = src[p·ld + i] for i < m
// and p < kk, into the blocks of all ⌈m/MR⌉ row blocks at once (dst holds
// them back to back, ABlock(kp) each; rows past m and p past kk zero).
// tmp is scratch of at least PairsLen(m)·Step/2 bf16 (used without
// AVX512-BF16). With AVX512-BF16 each Step of 16 rows is paired and
// transposed in registers (transposeATAVX512); otherwise the 16 row pairs
// go through tmp and each row's 16 pairs (one cache line) are written at
// once.
func (k *Kernel) PackAT(dst []uint16, src []float32, ld, m, kk, kp, p0, p1 int, tmp []uint16) {
	k.PackATRows(dst, src, ld, m, kk, kp, p0, p1, 0, (m+k.MR-1)/k.MR*k.MR, tmp, nil)
}

// PackATSums reports whether PackATRows can form the row sums (this CPU
// has AVX512-BF16).
func PackATSums() bool { return hasAVX512BF16() == nil }

// PackATRows is PackAT for the rows r0 ≤ i < r1 of the blocks only (r0 a
// multiple of 16; r1 a multiple of 16 or the padded rows ⌈m/MR⌉·MR).
// With sums (PackATSums must be true), it also adds Σ_{p0≤p<p1} A(i, p)
// to sums[i] for r0 ≤ i < min(r1, m), in float32 over p in increasing
// order, from the unrounded values.
func (k *Kernel) PackATRows(dst []uint16, src []float32, ld, m, kk, kp, p0, p1, r0, r1 int, tmp []uint16, sums []float32) {
	rowsPad := (m + k.MR - 1) / k.MR * k.MR
	lda := LDA(kp)
	dst = dst[:rowsPad*lda]
	fast := hasAVX512BF16() == nil
	if sums != nil && !fast {
		panic("bf16: PackATRows with sums needs AVX512-BF16")
	}
	d32 := unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), rowsPad*lda/2)
	ld2 := lda / 2
	for s0 := p0; s0 < p1; s0 += Step {
		rows := min(max(kk-s0, 0), Step)
		if fast && rows > 0 {
			for c0 := r0; c0 < r1; c0 += 16 {
				cols, store := min(max(m-c0, 0), 16), min(16, r1-c0)
				if cols == 0 {
					for i := c0; i < c0+store; i++ {
						clear(dst[i*lda+s0 : i*lda+s0+Step])
					}
					continue
				}
				_ = src[(s0+rows-1)*ld+c0+cols-1]   // the last float read
				_ = dst[(c0+store-1)*lda+s0+Step-1] // the last bf16 written
				var sp *float32
				if sums != nil {
					_ = sums[c0+cols-1] // the last sum written
					sp = &sums[c0]
				}
				transposeATAVX512(&dst[c0*lda+s0], 2*lda, &src[s0*ld+c0], 4*ld, rows, cols, store, sp)
			}
			continue
		}
		t32 := unsafe.Slice((*uint32)(unsafe.Pointer(&tmp[0])), 16*m)
		for q := 0; q < 16; q++ {
			p := s0 + 2*q
			t := tmp[2*q*m : 2*(q+1)*m]
			if p >= kk {
				clear(t)
				continue
			}
			pairRows(t, src[p*ld:p*ld+m], src, (p+1)*ld, p+1 < kk)
		}
		q0 := s0 / 2
		for i := r0; i < min(r1, m); i++ {
			d := (*[16]uint32)(d32[i*ld2+q0:])
			for q := range d {
				d[q] = t32[q*m+i]
			}
		}
		for i := max(m, r0); i < r1; i++ {
			clear(d32[i*ld2+q0 : i*ld2+q0+16])
		}
	}
	if p1 == kp && lda > kp { // the rows' padding, by the last task
		for i := r0; i < r1; i++ {
			clear(dst[i*lda+kp : i*lda+lda])
		}
	}
}

// PackBT packs the inner indices p0 ≤ p < p1 (p0 even) of a B whose rows
// p are contiguous, B(j, p) = src[p·ld + j] for j < n and p < kk, into all
// ⌈n/NR⌉ panels at once (dst holds them back to back, BPanel(kp) each;
// columns past n and p past kk zero). tmp is scratch of at least
// PairsLen(n) bf16.
func PackBT(dst []uint16, src []float32, ld, n, kk, kp, p0, p1 int, tmp []uint16) {
	PackBTSeg(dst, BPanel(kp), src, ld, n, kk, kp, p0, p1, tmp)
}

// PackBTSeg is PackBT into one segment of an inner dimension concatenated
// from several operands (each padded to a multiple of Step): the panels
// are pl bf16 apart (BPanel of the whole inner dimension), and dst starts
// at the segment's first step in the first panel (off·NR for a segment at
// inner offset off, a multiple of Step).
func PackBTSeg(dst []uint16, pl int, src []float32, ld, n, kk, kp, p0, p1 int, tmp []uint16) {
	panels := (n + NR - 1) / NR
	clear(tmp[2*n : 2*panels*NR])
	fast := hasAVX512BF16() == nil
	for p := p0; p < p1; p += 2 {
		s, q := p/Step, p%Step/2
		if p >= kk {
			for jp := 0; jp < panels; jp++ {
				d := dst[jp*pl+s*1024:]
				clear(d[q*32 : q*32+32])
				clear(d[512+q*32 : 512+q*32+32])
			}
			continue
		}
		if fast && p+1 < kk && n > 0 {
			_ = src[(p+1)*ld+n-1]                       // the last float read
			_ = dst[(panels-1)*pl+s*1024+512+q*32+32-1] // the last bf16 written
			pairsPanelsAVX512(&dst[s*1024+q*32], pl, &src[p*ld], &src[(p+1)*ld], n, panels)
			continue
		}
		pairRows(tmp[:2*n], src[p*ld:p*ld+n], src, (p+1)*ld, p+1 < kk)
		for jp := 0; jp < panels; jp++ {
			d := dst[jp*pl+s*1024:]
			copy(d[q*32:q*32+32], tmp[jp*64:jp*64+32])
			copy(d[512+q*32:512+q*32+32], tmp[jp*64+32:jp*64+64])
		}
	}
}

// PairsLen is the scratch PackAT and PackBT need for m rows or n columns.
func PairsLen(n int) int { return Step * ((n + NR - 1) / NR * NR) }

// pairRows writes dst[2j] = bf16(r0[j]) and dst[2j+1] = bf16(src[off+j])
// (0 unless second) for j < len(r0), with AVX512-BF16 where the CPU has it.
func pairRows(dst []uint16, r0, src []float32, off int, second bool) {
	n := len(r0)
	if n == 0 {
		return
	}
	dst = dst[:2*n]
	if !second {
		for j, f := range r0 {
			dst[2*j], dst[2*j+1] = FromFloat32(f), 0
		}
		return
	}
	r1 := src[off : off+n]
	if hasAVX512BF16() == nil {
		pairsAVX512(&dst[0], &r0[0], &r1[0], n)
		return
	}
	for j := range r0 {
		dst[2*j], dst[2*j+1] = FromFloat32(r0[j]), FromFloat32(r1[j])
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
