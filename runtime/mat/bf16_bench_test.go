package mat

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// BenchmarkLinearPrecision measures the linear layers' products at the
// shapes of specs random (the default: 2048 tokens a step, d 128, ffn 512)
// and mid (4096 tokens, d 256, ffn 1024) on one goroutine: forward
// (x·wᵀ), input gradient (dy·w) and weight gradient (dyᵀ·x), for each
// layer shape d→d, d→ffn and ffn→d, in float32 on the CPU's best GEMM
// micro-kernel and in bf16 at every bf16 level that runs here. It reports
// GFLOP/s (2·m·k·n per product).
func BenchmarkLinearPrecision(b *testing.B) {
	type engine struct {
		name string
		set  func(e *Engine)
	}
	var engines []engine
	for _, s := range microSets(b) {
		if s.ISA == kernels.Go {
			continue
		}
		engines = append(engines, engine{"f32-" + s.ISA.String(), func(e *Engine) { e.SetGemm(s.GemmTile, s.GemmShape) }})
	}
	for _, l := range []bf16.Level{bf16.AVX512BF16, bf16.AMX} {
		k, err := bf16.New(l)
		if err != nil {
			b.Logf("%s not measured: %v", l, err)
			continue
		}
		engines = append(engines, engine{"bf16-" + l.String(), func(e *Engine) { e.SetBF16(k) }})
	}
	r := rand.New(rand.NewPCG(1, 1))
	for _, sp := range []struct {
		spec      string
		m, d, ffn int
	}{{"random", 2048, 128, 512}, {"mid", 4096, 256, 1024}} {
		for _, sh := range [][2]int{{sp.d, sp.d}, {sp.d, sp.ffn}, {sp.ffn, sp.d}} {
			m, k, n := sp.m, sh[0], sh[1]
			x, w, dy := randSlice(r, m*k), randSlice(r, n*k), randSlice(r, m*n)
			y, dx, dw := make([]float32, m*n), make([]float32, m*k), make([]float32, n*k)
			for _, pass := range []string{"fwd", "backx", "backw"} {
				for _, eg := range engines {
					b.Run(fmt.Sprintf("%s/m=%d,k=%d,n=%d/%s/%s", sp.spec, m, k, n, pass, eg.name), func(b *testing.B) {
						e := NewEngine(nil)
						eg.set(e)
						for b.Loop() {
							switch pass {
							case "fwd":
								e.Linear(y, x, w, nil, m, k, n)
							case "backx":
								e.LinearBackX(dx, dy, w, m, k, n, false)
							case "backw":
								e.LinearBackW(dw, nil, dy, x, m, k, n)
							}
						}
						b.ReportMetric(2*float64(m*k*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
					})
				}
			}
		}
	}
}

// BenchmarkShared measures the three products of vanilla's v, q and k at
// spec mid's shapes (4096 tokens, d 256) on one goroutine, in bf16 at the
// best level here: as separate single products and through the shared
// forms (LinearShared, LinearBackWShared, LinearBackXSum). It reports
// GFLOP/s (2·m·k·n per product, three products).
func BenchmarkShared(b *testing.B) {
	var kn *bf16.Kernel
	for _, l := range []bf16.Level{bf16.AMX, bf16.AVX512BF16} {
		if k, err := bf16.New(l); err == nil {
			kn = k
			break
		}
	}
	if kn == nil {
		b.Skip("no bf16 level here")
	}
	const m, d, outs = 4096, 256, 3
	r := rand.New(rand.NewPCG(1, 1))
	x, dx := randSlice(r, m*d), make([]float32, m*d)
	var lo []LinearOut
	var go_ []GradOut
	var bt []BackXTerm
	for i := 0; i < outs; i++ {
		w, bias, dy := randSlice(r, d*d), randSlice(r, d), randSlice(r, m*d)
		lo = append(lo, LinearOut{Y: make([]float32, m*d), W: w, B: bias, N: d})
		go_ = append(go_, GradOut{DW: make([]float32, d*d), DB: make([]float32, d), DY: dy, N: d})
		bt = append(bt, BackXTerm{DY: dy, W: w, N: d})
	}
	for _, pass := range []string{"fwd", "backx", "backw"} {
		for _, shared := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/shared=%v/bf16-%s", pass, shared, kn.Level), func(b *testing.B) {
				e := NewEngine(nil)
				e.SetBF16(kn)
				for b.Loop() {
					switch {
					case pass == "fwd" && shared:
						e.LinearShared(x, m, d, lo)
					case pass == "fwd":
						for _, o := range lo {
							e.Linear(o.Y, x, o.W, o.B, m, d, d)
						}
					case pass == "backx" && shared:
						e.LinearBackXSum(dx, m, d, bt, false)
					case pass == "backx":
						for i, t := range bt {
							e.LinearBackX(dx, t.DY, t.W, m, d, d, i > 0)
						}
					case pass == "backw" && shared:
						e.LinearBackWShared(x, m, d, go_)
					default:
						for _, o := range go_ {
							e.LinearBackW(o.DW, o.DB, o.DY, x, m, d, d)
						}
					}
				}
				b.ReportMetric(outs*2*float64(m*d*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
