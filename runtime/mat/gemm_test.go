package mat

import (
	"fmt"
	"math/rand/v2"
	"testing"

	_ "github.com/synthgen/synthgen/generated/odd" // links a GEMM micro-kernel per level
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/parallel"
)

// microSets returns the kernel sets of spec odd this run may use (the CPU's
// levels up to SYNTHGEN_ISA's cap).
func microSets(t testing.TB) []kernels.Set {
	limit, err := kernels.Level()
	if err != nil {
		t.Fatal(err)
	}
	sets, err := kernels.Sets("odd")
	if err != nil {
		t.Fatal(err)
	}
	var out []kernels.Set
	for _, s := range sets {
		if s.ISA <= limit && s.GemmTile != nil {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		t.Fatal("no GEMM micro-kernel linked")
	}
	return out
}

// gemmShapes adds sizes around the tile shapes and the kc block to the
// plain path's shapes.
var gemmShapes = append([][3]int{
	{1, 7, 33}, {33, 129, 7}, {129, 33, 1}, {7, 1, 129}, {17, 256, 65}, {9, 257, 31},
	{48, 300, 64}, {200, 40, 300},
	// Row strides of a multiple of 512 floats, which take the packed paths
	// (B copied per panel, a transposed A copied per block), with edges.
	{37, 512, 33}, {70, 20, 512}, {141, 512, 1024},
	// A weight gradient of wide blocks (wideTarget), with edges in both
	// dimensions and a part k-block.
	{600, 300, 520},
}, shapes...)

// TestProductsMicro runs the products through each level's micro-kernel.
func TestProductsMicro(t *testing.T) {
	for _, s := range microSets(t) {
		t.Run(s.ISA.String(), func(t *testing.T) {
			checkProducts(t, gemmShapes, func(e *Engine) { e.SetGemm(s.GemmTile, s.GemmShape) })
		})
	}
}

// TestNoAllocsMicro checks that the micro-kernel path does not allocate
// once the engine is set up.
func TestNoAllocsMicro(t *testing.T) {
	pool := parallel.New(2)
	defer pool.Close()
	for _, s := range microSets(t) {
		e := NewEngine(nil)
		e.SetGemm(s.GemmTile, s.GemmShape)
		e.SetPool(pool)
		m, k, n := 130, 300, 70
		x, w, b := Alloc(m*k), Alloc(n*k), Alloc(n)
		y, dy, dx, dw := Alloc(m*n), Alloc(m*n), Alloc(m*k), Alloc(n*k)
		allocs := testing.AllocsPerRun(10, func() {
			e.Linear(y, x, w, b, m, k, n)
			e.LinearAdd(y, x, w, b, m, k, n)
			e.LinearBackX(dx, dy, w, m, k, n, false)
			e.LinearBackW(dw, b, dy, x, m, k, n)
		})
		if allocs != 0 {
			t.Errorf("%s: products allocate %v times per run", s.ISA, allocs)
		}
	}
}

// BenchmarkGemm measures the three products of a linear layer at the
// shapes of spec random at batch 16 (m = 16·128 rows), per micro-kernel
// level and for the plain-Go path.
func BenchmarkGemm(b *testing.B) {
	levels := []kernels.Set{{}}
	levels = append(levels, microSets(b)...)
	for _, s := range levels {
		impl := "plain"
		if s.GemmTile != nil {
			impl = s.ISA.String()
		}
		for _, workers := range []int{1, 2} {
			for _, sh := range [][3]int{{2048, 128, 128}, {2048, 128, 512}, {2048, 512, 128}} {
				for _, which := range []string{"fwd", "backx", "backw"} {
					name := fmt.Sprintf("impl=%s/w=%d/m=%d/k=%d/n=%d/%s", impl, workers, sh[0], sh[1], sh[2], which)
					b.Run(name, func(b *testing.B) {
						benchGemm(b, s, workers, sh[0], sh[1], sh[2], which)
					})
				}
			}
		}
	}
}

func benchGemm(b *testing.B, s kernels.Set, workers, m, k, n int, which string) {
	pool := parallel.New(workers)
	defer pool.Close()
	e := NewEngine(pool)
	if s.GemmTile != nil {
		e.SetGemm(s.GemmTile, s.GemmShape)
	}
	e.Reserve(ScratchSize(m, k, n))
	r := rand.New(rand.NewPCG(5, 6))
	x, w, bias := randSlice(r, m*k), randSlice(r, n*k), randSlice(r, n)
	y, dy, dx, dw := Alloc(m*n), randSlice(r, m*n), Alloc(m*k), Alloc(n*k)
	for b.Loop() {
		switch which {
		case "fwd":
			e.Linear(y, x, w, bias, m, k, n)
		case "backx":
			e.LinearBackX(dx, dy, w, m, k, n, false)
		case "backw":
			e.LinearBackW(dw, bias, dy, x, m, k, n)
		}
	}
	b.ReportMetric(2*float64(m)*float64(k)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
