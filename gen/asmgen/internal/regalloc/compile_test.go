package regalloc

import (
	"testing"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// TestCheckVEXRegisters compiles a function that keeps 17 YMM registers
// live: with AVX2 instructions alone the allocator must reach Y16, which
// exists only in AVX-512's encoding, and Compile must refuse it; the same
// function with an AVX-512 instruction in it compiles.
func TestCheckVEXRegisters(t *testing.T) {
	for _, avx512 := range []bool{false, true} {
		c := build.NewContext()
		c.Function("live17")
		c.SignatureExpr("func(p *[17][8]float32)")
		p := c.Load(c.Param("p"), c.GP64())
		var ys []reg.VecVirtual
		for i := 0; i < 17; i++ {
			y := c.YMM()
			c.VMOVUPS(operand.Mem{Base: p, Disp: 32 * i}, y)
			ys = append(ys, y)
		}
		if avx512 {
			c.VPXORD(ys[1], ys[0], ys[0]) // an EVEX-only instruction (AVX512F, AVX512VL)
		}
		for i := 1; i < 17; i++ {
			c.VADDPS(ys[i], ys[0], ys[0])
		}
		c.VMOVUPS(ys[0], operand.Mem{Base: p})
		c.VZEROUPPER()
		c.RET()
		file, err := c.Result()
		if err != nil {
			t.Fatal(err)
		}
		err = Compile(file)
		switch {
		case avx512 && err != nil:
			t.Errorf("with an AVX-512 instruction: %v", err)
		case !avx512 && err == nil:
			t.Error("AVX2 alone with 17 live YMM registers compiled")
		case !avx512:
			t.Log(err)
		}
	}
}
