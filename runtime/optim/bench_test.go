package optim

import (
	"fmt"
	"math"
	"testing"

	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/parallel"
)

// benchParams is the parameter set of long1024_random's size: 20.3M
// elements, 16.8M of them in four R tensors [4, 1024, 1024] (causal when
// tri is set), the rest in matrices of 1M and vectors of 1K. Gradients are
// nonzero on R's causal triangle only (what the backward writes), of order
// 1e-3 elsewhere.
func benchParams(tri bool) []*model.Param {
	var ps []*model.Param
	add := func(name string, tri bool, shape ...int) {
		n := 1
		for _, s := range shape {
			n *= s
		}
		p := &model.Param{Name: name, Shape: shape, Data: make([]float32, n), Grad: make([]float32, n), Decay: len(shape) > 1, CausalTri: tri}
		for i := range p.Data {
			p.Data[i] = float32(math.Sin(float64(i))) * 0.02
			p.Grad[i] = float32(math.Cos(float64(i))) * 1e-3
		}
		if tri {
			nn := shape[1]
			for i := range p.Data {
				if r, c := i/nn%nn, i%nn; c > r {
					p.Grad[i] = 0
				}
			}
		}
		ps = append(ps, p)
	}
	for l := range 4 {
		add(fmt.Sprint("R", l), tri, 4, 1024, 1024)
		for k := range 3 {
			add(fmt.Sprint("w", l, k), false, 1024, 1024)
		}
		for k := range 8 {
			add(fmt.Sprint("b", l, k), false, 1024)
		}
	}
	add("emb", false, 256, 1024)
	return ps
}

// benchOpt is an optimizer over benchParams with the highest linked
// kernel and a pool of workers, after one warm-up update (moments touched).
func benchOpt(b *testing.B, workers int, tri bool) (*AdamW, int) {
	sets := kernelSets(b)
	ps := benchParams(tri)
	o := NewAdamW(ps, DefaultConfig())
	o.Kernel = sets[len(sets)-1].AdamW
	if workers > 1 {
		pool := parallel.New(workers)
		b.Cleanup(pool.Close)
		o.Runner = pool
	}
	o.Step(1e-3, 1)
	n := 0
	for _, p := range ps {
		n += len(p.Data)
	}
	return o, n
}

// BenchmarkStep is AdamW.Step on 20.3M parameters, moments already
// touched: GB/s counts the 28 bytes a dense update moves per parameter
// (read p, g, m, v; write p, m, v), whatever the update skips, so the
// figures compare across versions; Gparams/s is parameters per second.
func BenchmarkStep(b *testing.B) {
	for _, tri := range []bool{false, true} {
		for _, w := range []int{1, 2} {
			b.Run(fmt.Sprintf("causalR=%t/workers=%d", tri, w), func(b *testing.B) {
				o, n := benchOpt(b, w, tri)
				f0 := minorFaults()
				b.ResetTimer()
				for range b.N {
					o.Step(1e-3, 0.5)
				}
				s := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(float64(minorFaults()-f0)/float64(b.N), "faults/op")
				b.ReportMetric(28*float64(n)/s/1e9, "GB/s")
				b.ReportMetric(float64(n)/s/1e9, "Gparams/s")
			})
		}
	}
}

// BenchmarkStepFirst is the first update of a fresh optimizer (its moments
// untouched memory until then), as the first step of a run does it.
func BenchmarkStepFirst(b *testing.B) {
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			sets := kernelSets(b)
			ps := benchParams(false)
			var pool *parallel.Pool
			if w > 1 {
				pool = parallel.New(w)
				defer pool.Close()
			}
			n := 0
			for _, p := range ps {
				n += len(p.Data)
			}
			var faults int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				o := NewAdamW(ps, DefaultConfig())
				o.Kernel = sets[len(sets)-1].AdamW
				if pool != nil {
					o.Runner = pool
				}
				f0 := minorFaults()
				b.StartTimer()
				o.Step(1e-3, 0.5)
				faults += minorFaults() - f0
			}
			s := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(faults)/float64(b.N), "faults/op")
			b.ReportMetric(28*float64(n)/s/1e9, "GB/s")
		})
	}
}

// BenchmarkGradNorm is AdamW.GradNorm on 20.3M parameters: GB/s counts
// the 4 bytes of gradient per parameter.
func BenchmarkGradNorm(b *testing.B) {
	for _, tri := range []bool{false, true} {
		for _, w := range []int{1, 2} {
			b.Run(fmt.Sprintf("causalR=%t/workers=%d", tri, w), func(b *testing.B) {
				o, n := benchOpt(b, w, tri)
				b.ResetTimer()
				for range b.N {
					o.GradNorm()
				}
				s := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(4*float64(n)/s/1e9, "GB/s")
				b.ReportMetric(float64(n)/s/1e9, "Gparams/s")
			})
		}
	}
}

// BenchmarkCopy is the machine's reference pace: copy of 256 MB between
// two buffers, GB/s counting read and write (8 bytes per float32).
func BenchmarkCopy(b *testing.B) {
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			const n = 64 << 20
			src, dst := make([]float32, n), make([]float32, n)
			for i := range src {
				src[i] = 1
			}
			copy(dst, src)
			pool := parallel.New(w)
			defer pool.Close()
			j := &copyJob{src, dst}
			b.ResetTimer()
			for range b.N {
				pool.Run(n/chunkSize, j)
			}
			s := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(8*n/s/1e9, "GB/s")
		})
	}
}

type copyJob struct{ src, dst []float32 }

func (j *copyJob) Run(_, t int) {
	copy(j.dst[t*chunkSize:(t+1)*chunkSize], j.src[t*chunkSize:(t+1)*chunkSize])
}
