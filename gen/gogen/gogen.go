// Package gogen emits, with jennifer, the unrolled pure-Go version of each
// kernel: the spec's sizes are constants, inner loops over the head width
// are unrolled, and slices are re-sliced to constant lengths so the
// compiler drops bounds checks. These functions are the fallback on every
// CPU and architecture, and under the purego build tag, and the reference
// the assembly is tested against.
package gogen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

// Name is the Go function's name for op.
func Name(op catalog.Op) string { return op.Func + "Go" }

type emitter func(f *jen.File, op catalog.Op, cfg catalog.Config)

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

// Emit adds op's Go function, named Name(op), to f.
func Emit(f *jen.File, op catalog.Op, cfg catalog.Config) error {
	e := emitters[op.Kind]
	if e == nil {
		return fmt.Errorf("gogen: no emitter for %s", op.Kind)
	}
	e(f, op, cfg)
	return nil
}
