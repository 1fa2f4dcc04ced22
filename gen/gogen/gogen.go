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

// Emit adds op's Go function, named Name(op), to f.
func Emit(f *jen.File, op catalog.Op, cfg catalog.Config) error {
	e := emitterFor(op.Kind)
	if e == nil {
		return fmt.Errorf("gogen: no emitter for %s", op.Kind)
	}
	e(f, op, cfg)
	return nil
}
