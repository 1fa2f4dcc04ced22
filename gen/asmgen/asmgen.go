// Package asmgen emits the AVX-512 and AVX2 assembly of a spec's kernels
// with avo. Each kernel kind of the catalog has its own emitter, listed in
// emitters; Emit dispatches on the op's kind. The emitted functions are named op.Func+"AVX512" and
// op.Func+"AVX2" and have the signature of the op's kind.
package asmgen

import (
	"fmt"
	"math"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

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

// emitters is the emitter of each kind of the catalog; TestEveryKind
// checks that it covers them all.
var emitters = map[catalog.Kind]emitter{
	catalog.SoftmaxValue:     emitSoftmaxValue,
	catalog.SoftmaxValueBack: emitSoftmaxValueBack,
	catalog.Product:          emitProduct,
	catalog.ProductBackX:     emitProductBackX,
	catalog.ProductBackW:     emitProductBackW,
	catalog.Tile:             emitTile,
	catalog.TileBack:         emitTileBack,
	catalog.TriScale:         emitTriScale,
	catalog.TriAxpy:          emitTriAxpy,
	catalog.TriDot:           emitTriDot,
	catalog.AFTFull:          emitAFT,
	catalog.AFTLocal:         emitAFT,
	catalog.AFTConv:          emitAFT,
	catalog.AFTSimple:        emitAFT,
	catalog.AFTFullBack:      emitAFTBack,
	catalog.AFTLocalBack:     emitAFTBack,
	catalog.AFTConvBack:      emitAFTBack,
	catalog.AFTSimpleBack:    emitAFTBack,
	catalog.Linear:           emitLinear,
	catalog.LinearBack:       emitLinearBack,
	catalog.GemmTile:         emitGemmTile,
	catalog.LayerNorm:        emitLayerNorm,
	catalog.LayerNormBack:    emitLayerNormBack,
	catalog.LayerNormGrad:    emitLayerNormGrad,
	catalog.Gelu:             emitGelu,
	catalog.GeluBack:         emitGeluBack,
	catalog.SoftmaxStats:     emitSoftmaxStats,
	catalog.SoftmaxScale:     emitSoftmaxScale,
	catalog.AdamW:            emitAdamW,
	catalog.Exp:              emitExp,
	catalog.Gate:             emitGate,
	catalog.GateBack:         emitGateBack,
	catalog.AFTMax:           emitAFTMax,
	catalog.AFTFactors:       emitAFTFactors,
	catalog.AFTQuot:          emitAFTQuot,
	catalog.AFTQuotBack:      emitAFTQuotBack,
	catalog.AFTKVBack:        emitAFTKVBack,
	catalog.Gemv:             emitGemv,
	catalog.Attend:           emitAttend,
	catalog.Scores:           emitScores,
	catalog.SoftmaxRows:      emitSoftmaxRows,
	catalog.SoftmaxRowsBack:  emitSoftmaxRowsBack,
}

// unmaskedAsm lists the Causal kinds whose emitters have the unmasked form
// (catalog.Config.Bidirectional).
var unmaskedAsm = map[catalog.Kind]bool{
	catalog.TriScale: true, catalog.TriAxpy: true, catalog.TriDot: true,
	catalog.Product: true, catalog.ProductBackX: true, catalog.ProductBackW: true,
	catalog.Tile: true, catalog.TileBack: true,
	catalog.SoftmaxValue: true, catalog.SoftmaxValueBack: true,
	catalog.SoftmaxRows: true, catalog.SoftmaxRowsBack: true,
}

// Has reports whether there is assembly for op under cfg: every kind has,
// except, for a bidirectional spec, a Causal kind whose emitter knows only
// the causal triangle; its Go kernel serves every level.
func Has(op catalog.Op, cfg catalog.Config) bool {
	return !cfg.Bidirectional || !op.Entry().Causal || unmaskedAsm[op.Kind]
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
	e := emitters[op.Kind]
	if e == nil {
		return fmt.Errorf("asmgen: no emitter for %s", op.Kind)
	}
	if !Has(op, f.Config) {
		return fmt.Errorf("asmgen: no unmasked (bidirectional) %s yet", op.Kind)
	}
	f.Ctx.Function(Name(op, isa))
	f.Ctx.Attributes(attr.NOSPLIT)
	f.Ctx.SignatureExpr(op.Sig())
	f.Ctx.Pragma("noescape")
	e(f, op, isa)
	return nil
}
