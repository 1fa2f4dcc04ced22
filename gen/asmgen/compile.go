package asmgen

import (
	"github.com/mmcloughlin/avo/ir"

	"github.com/synthgen/synthgen/gen/asmgen/internal/regalloc"
)

// Compile runs avo's compilation passes on f: avo's pass.Compile, with the
// register allocation and liveness of package regalloc (the same
// allocation, faster) and a check that AVX2 code uses only X/Y0–15.
func Compile(f *ir.File) error { return regalloc.Compile(f) }
