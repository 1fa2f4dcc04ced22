package asmgen

import (
	"maps"
	"path/filepath"
	"testing"

	"github.com/mmcloughlin/avo/pass"

	"github.com/synthgen/synthgen/gen/asmgen/internal/regalloc"
	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// TestAllocateRegistersIsAvos emits every kernel of specs of every kind —
// the synthesizer family at short and long rows, vanilla, the aft
// variants, linear attention, odd sizes — at both levels, and requires
// regalloc.Allocate to give each function exactly pass.AllocateRegisters'
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
			for _, p := range regalloc.BeforeAllocation {
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
			if err := regalloc.Allocate(fn); err != nil {
				t.Fatalf("%s %s: %v", name, fn.Name, err)
			}
			if !maps.Equal(fn.Allocation, want) {
				t.Errorf("%s %s: the allocation differs from avo's", name, fn.Name)
			}
		}
	}
}
