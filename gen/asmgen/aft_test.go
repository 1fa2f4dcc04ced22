package asmgen

import (
	"fmt"
	"testing"

	"github.com/mmcloughlin/avo/printer"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// TestAFTEmitsAtAnyWidth emits every attention-free and linear-attention
// kernel at head widths the shipped specs do not have (a short tail, many
// channel blocks) on both levels: the registers must allocate (avo does not
// spill) and AVX2 code must stay within X/Y0–15; causal and unmasked
// (a bidirectional spec's kernels).
func TestAFTEmitsAtAnyWidth(t *testing.T) {
	kinds := []catalog.Kind{
		catalog.AFTFull, catalog.AFTFullBack, catalog.AFTLocal, catalog.AFTLocalBack,
		catalog.AFTConv, catalog.AFTConvBack, catalog.AFTSimple, catalog.AFTSimpleBack,
		catalog.Linear, catalog.LinearBack,
	}
	for _, bi := range []bool{false, true} {
		for _, dh := range []int{3, 20, 144} {
			for _, k := range kinds {
				for _, isa := range []kernels.ISA{kernels.AVX2, kernels.AVX512} {
					name := fmt.Sprintf("bidirectional=%v/dh=%d/%s/%s", bi, dh, k, isa)
					f := NewFile(catalog.Config{N: 64, D: 2 * dh, DH: dh, Heads: 2, Bidirectional: bi})
					op := catalog.Op{Field: k.String(), Func: "k", Kind: k, Window: 5}
					if err := Emit(f, op, isa); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					file, err := f.Ctx.Result()
					if err == nil {
						err = Compile(file)
					}
					if err != nil {
						t.Errorf("%s: %v", name, err)
						continue
					}
					if isa != kernels.AVX2 {
						continue
					}
					text, err := printer.NewGoAsm(printer.Config{Pkg: "x"}).Print(file)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if m := aftHighReg.Find(text); m != nil {
						t.Errorf("%s: AVX2 code uses %s", name, m)
					}
				}
			}
		}
	}
}
