package model

import (
	"unsafe"

	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/mat"
)

// WorkspaceBytes is the memory, in bytes, that NewWorkspace(batch) allocates
// on m (its buffers, the matrix engine's scratch it reserves, and the
// buffers the passes allocate on first use), computed without allocating:
// the same code sizes both (buildWorkspace), so the estimate cannot drift
// from the allocation. Callers use it to refuse a batch the machine cannot
// hold before allocating it.
//
// With a bf16 kernel (SetBF16, before WorkspaceBytes is called) it also
// counts the bf16 engine's packed operands, which it allocates on first
// use. The attention's per-worker strip buffers (strips_bf16.go,
// attention_bf16.go: a few MB a worker at N 2048) belong to the model, not
// to a batch's workspace, and are not counted.
func (m *Model) WorkspaceBytes(batch int) int64 {
	a := &wsAlloc{count: true}
	m.buildWorkspace(batch, a)
	if m.eng.BF16() != bf16.None {
		// The bf16 engine's packed operands, A and B of the largest
		// product (a linear layer's backward on batch·N rows), which it
		// allocates on first use: 2 bytes each.
		rows, wide := max(batch, 1)*m.n, bf16.Pad(max(m.d, m.ffn, m.vocab))
		a.lazy(rows * wide)
	}
	return a.bytes
}

// ParamBytes is the memory of m's parameters: their values and gradients.
func (m *Model) ParamBytes() int64 {
	var b int64
	for _, p := range m.Params {
		b += int64(len(p.Data)+len(p.Grad)) * 4
	}
	return b
}

// wsAlloc makes a workspace's buffers, adding up their bytes; when
// counting, it allocates none of the large ones (the small headers that
// buildWorkspace walks are made either way).
type wsAlloc struct {
	count bool
	bytes int64
}

// add counts an allocation of b bytes as Go's allocator makes it: a large
// one (over 32 KiB) takes whole 8 KiB pages, a small one about b.
func (a *wsAlloc) add(b int64) {
	const page, large = 8 << 10, 32 << 10
	if b > large {
		b = (b + page - 1) / page * page
	}
	a.bytes += b
}

// f32 is mat.Alloc(n): n aligned float32s (16 more allocated).
func (a *wsAlloc) f32(n int) []float32 {
	a.add(int64(n+16) * 4)
	if a.count {
		return nil
	}
	return mat.Alloc(n)
}

// f32plain is make([]float32, n).
func (a *wsAlloc) f32plain(n int) []float32 {
	a.add(int64(n) * 4)
	if a.count {
		return nil
	}
	return make([]float32, n)
}

func (a *wsAlloc) i32(n int) []int32 {
	a.add(int64(n) * 4)
	if a.count {
		return nil
	}
	return make([]int32, n)
}

func (a *wsAlloc) f64(n int) []float64 {
	a.add(int64(n) * 8)
	if a.count {
		return nil
	}
	return make([]float64, n)
}

func (a *wsAlloc) bools(n int) []bool {
	a.add(int64(n))
	if a.count {
		return nil
	}
	return make([]bool, n)
}

// terms is make([]mat.TNTerm, 0, n).
func (a *wsAlloc) terms(n int) []mat.TNTerm {
	a.add(int64(n) * int64(unsafe.Sizeof(mat.TNTerm{})))
	if a.count {
		return nil
	}
	return make([]mat.TNTerm, 0, n)
}

// slices and layers are the per-layer headers, made even when counting.
func (a *wsAlloc) slices(n int) [][]float32 {
	a.add(int64(n) * int64(unsafe.Sizeof([]float32(nil))))
	return make([][]float32, n)
}

func (a *wsAlloc) layers(n int) []layerWS {
	a.add(int64(n) * int64(unsafe.Sizeof(layerWS{})))
	return make([]layerWS, n)
}

// lazy counts a buffer the passes allocate on first use (an upper bound
// of its size in float32s); it allocates nothing.
func (a *wsAlloc) lazy(n int) { a.add(int64(n+16) * 4) }

// scratch reserves the matrix engine's scratch of size floats (counted in
// full: an engine that already holds as much allocates nothing).
func (a *wsAlloc) scratch(e *mat.Engine, size int) {
	a.add(int64(size+16) * 4)
	if !a.count {
		e.Reserve(size)
	}
}
