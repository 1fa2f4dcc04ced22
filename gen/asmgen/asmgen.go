// Package asmgen emits the AVX-512 and AVX2 assembly of a spec's kernels
// with avo. Each kernel kind has its own emitter; Emit dispatches on the
// catalog entry. The emitted functions are named op.Func+"AVX512" and
// op.Func+"AVX2" and have the signature of the op's kind.
package asmgen

import (
	"errors"
	"fmt"
	"math"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// ErrNotImplemented is returned for a kind and level with no emitter; the
// package writer then leaves that kernel to the next lower level.
var ErrNotImplemented = errors.New("no assembly emitter for this kernel kind")

// File collects the TEXT blocks and the read-only constants of one
// generated assembly file.
type File struct {
	Ctx    *build.Context
	Config catalog.Config
	consts map[string]operand.Mem
}

// NewFile starts an assembly file for a spec's sizes.
func NewFile(cfg catalog.Config) *File {
	ctx := build.NewContext()
	ctx.ConstraintExpr("!purego")
	return &File{Ctx: ctx, Config: cfg, consts: map[string]operand.Mem{}}
}

// Const returns a 4-byte RODATA constant holding bits, emitting it once per
// file; use it as the memory operand of _BCST instructions or broadcasts.
func (f *File) Const(name string, bits uint32) operand.Mem {
	key := fmt.Sprintf("%s_%08x", name, bits)
	if m, ok := f.consts[key]; ok {
		return m
	}
	m := f.Ctx.ConstData(key, operand.U32(bits))
	f.consts[key] = m
	return m
}

// ConstF32 is Const for a float32 value.
func (f *File) ConstF32(name string, v float32) operand.Mem {
	return f.Const(name, math.Float32bits(v))
}

// Table returns a RODATA table of 32-bit words, emitted once per file.
func (f *File) Table(name string, words []uint32) operand.Mem {
	if m, ok := f.consts[name]; ok {
		return m
	}
	m := f.Ctx.StaticGlobal(name)
	f.Ctx.DataAttributes(attr.RODATA | attr.NOPTR)
	for i, w := range words {
		f.Ctx.AddDatum(4*i, operand.U32(w))
	}
	f.consts[name] = m
	return m
}

type emitter func(f *File, op catalog.Op, isa kernels.ISA)

func emitterFor(k catalog.Kind) emitter {
	switch k {
	case catalog.SoftmaxValue:
		return emitSoftmaxValue
	case catalog.SoftmaxValueBack:
		return emitSoftmaxValueBack
	case catalog.Product:
		return emitProduct
	case catalog.ProductBackX:
		return emitProductBackX
	case catalog.ProductBackW:
		return emitProductBackW
	case catalog.Tile:
		return emitTile
	case catalog.TileBack:
		return emitTileBack
	case catalog.TriScale:
		return emitTriScale
	case catalog.TriAxpy:
		return emitTriAxpy
	case catalog.TriDot:
		return emitTriDot
	case catalog.AFTFull, catalog.AFTLocal, catalog.AFTConv, catalog.AFTSimple:
		return emitAFT
	case catalog.AFTFullBack, catalog.AFTLocalBack, catalog.AFTConvBack, catalog.AFTSimpleBack:
		return emitAFTBack
	case catalog.Linear:
		return emitLinear
	case catalog.LinearBack:
		return emitLinearBack
	case catalog.GemmTile:
		return emitGemmTile
	case catalog.LayerNorm:
		return emitLayerNorm
	case catalog.LayerNormBack:
		return emitLayerNormBack
	case catalog.LayerNormGrad:
		return emitLayerNormGrad
	case catalog.Gelu:
		return emitGelu
	case catalog.GeluBack:
		return emitGeluBack
	case catalog.SoftmaxStats:
		return emitSoftmaxStats
	case catalog.SoftmaxScale:
		return emitSoftmaxScale
	case catalog.AdamW:
		return emitAdamW
	case catalog.Exp:
		return emitExp
	case catalog.Gate:
		return emitGate
	case catalog.GateBack:
		return emitGateBack
	case catalog.AFTFactors:
		return emitAFTFactors
	case catalog.AFTQuotBack:
		return emitAFTQuotBack
	case catalog.AFTKVBack:
		return emitAFTKVBack
	}
	return nil
}

// Name is the assembly function's name for op at level isa.
func Name(op catalog.Op, isa kernels.ISA) string {
	switch isa {
	case kernels.AVX512:
		return op.Func + "AVX512"
	case kernels.AVX2:
		return op.Func + "AVX2"
	}
	return op.Func + "Go"
}

// Emit adds op's function for level isa (AVX2 or AVX512) to f, named by
// Name, with the op's signature and a //go:noescape stub. It is NOSPLIT
// unless its emitter needs a stack frame larger than NOSPLIT allows, in
// which case the emitter clears the attribute so the assembler adds the
// stack check.
func Emit(f *File, op catalog.Op, isa kernels.ISA) error {
	if isa != kernels.AVX2 && isa != kernels.AVX512 {
		return fmt.Errorf("asmgen: no assembly for level %s", isa)
	}
	e := emitterFor(op.Kind)
	if e == nil {
		return fmt.Errorf("asmgen: %s: %w", op.Kind, ErrNotImplemented)
	}
	if !Implemented(op.Kind, isa) {
		return fmt.Errorf("asmgen: %s %s: %w", op.Kind, isa, ErrNotImplemented)
	}
	f.Ctx.Function(Name(op, isa))
	f.Ctx.Attributes(attr.NOSPLIT)
	f.Ctx.SignatureExpr(op.Sig())
	f.Ctx.Pragma("noescape")
	e(f, op, isa)
	return nil
}
