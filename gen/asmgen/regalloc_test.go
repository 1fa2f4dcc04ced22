package asmgen

import (
	"maps"
	"path/filepath"
	"testing"

	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/pass"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// TestAllocateRegistersIsAvos emits every kernel of specs of every kind —
// the synthesizer family at short and long rows, vanilla, the aft
// variants, linear attention, odd sizes — at both levels, and requires
// allocateRegisters to give each function exactly pass.AllocateRegisters'
// allocation. (go generate's check compares every shipped package's files
// too.)
func TestAllocateRegistersIsAvos(t *testing.T) {
	names := []string{"odd", "odd_ffn", "odd_aft_full", "odd_aft_local_w1", "odd_aft_conv", "odd_linear", "mid", "long1024_vanilla"}
	if testing.Short() {
		names = names[:3]
	}
	for _, name := range names {
		s, err := specs.Load(filepath.Join("..", "..", "specs", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		f := NewFile(catalog.ConfigOf(s))
		for _, isa := range []kernels.ISA{kernels.AVX512, kernels.AVX2} {
			for _, op := range catalog.Ops(s) {
				if err := Emit(f, op, isa); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
		}
		file, err := f.Ctx.Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := pass.Verify.Execute(file); err != nil {
			t.Fatal(err)
		}
		for _, fn := range file.Functions() {
			for _, p := range beforeAllocation {
				if err := p(fn); err != nil {
					t.Fatalf("%s %s: %v", name, fn.Name, err)
				}
			}
			if err := pass.Liveness(fn); err != nil {
				t.Fatal(err)
			}
			if err := pass.AllocateRegisters(fn); err != nil {
				t.Fatalf("%s %s: avo: %v", name, fn.Name, err)
			}
			want := fn.Allocation
			if err := allocateRegisters(fn); err != nil {
				t.Fatalf("%s %s: %v", name, fn.Name, err)
			}
			if !maps.Equal(fn.Allocation, want) {
				t.Errorf("%s %s: the allocation differs from avo's", name, fn.Name)
			}
		}
	}
}

// TestCheckVEXRegisters compiles a function that keeps 17 YMM registers
// live: with AVX2 instructions alone the allocator must reach Y16, which
// exists only in AVX-512's encoding, and Compile must refuse it; the same
// function with an AVX-512 instruction in it compiles.
func TestCheckVEXRegisters(t *testing.T) {
	for _, avx512 := range []bool{false, true} {
		f := NewFile(catalog.Config{})
		c := f.Ctx
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
