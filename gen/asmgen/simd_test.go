package asmgen

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mmcloughlin/avo/printer"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// dataLine is a 4-byte datum of a RODATA symbol in avo's output.
var dataLine = regexp.MustCompile(`^DATA (\w+)<>\+(\d+)\(SB\)/4, \$(0x[0-9a-f]+)$`)

// TestOneMaskTable renders every kernel of specs whose AVX2 kernels take
// lane masks in several emitter families (softmax-value, products, tiles,
// row-wise, AFT, linear attention) and requires exactly one RODATA table
// with the lane-mask words (8 of all ones, then 8 zeros): the families
// share one toolbox, so a file carries the table once.
func TestOneMaskTable(t *testing.T) {
	for _, name := range []string{"small", "odd_aft_full", "odd_linear"} {
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
		r, err := f.Ctx.Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := Compile(r); err != nil {
			t.Fatal(err)
		}
		asm, err := printer.NewGoAsm(printer.Config{Pkg: "k"}).Print(r)
		if err != nil {
			t.Fatal(err)
		}
		words := map[string]map[int]uint64{}
		for _, line := range strings.Split(string(asm), "\n") {
			m := dataLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			off, _ := strconv.Atoi(m[2])
			v, _ := strconv.ParseUint(m[3], 0, 32)
			if words[m[1]] == nil {
				words[m[1]] = map[int]uint64{}
			}
			words[m[1]][off] = v
		}
		var tables []string
		for sym, w := range words {
			if len(w) != 16 {
				continue
			}
			mask := true
			for i := 0; i < 16; i++ {
				want := uint64(0)
				if i < 8 {
					want = 0xffffffff
				}
				if v, ok := w[4*i]; !ok || v != want {
					mask = false
				}
			}
			if mask {
				tables = append(tables, sym)
			}
		}
		if len(tables) != 1 {
			t.Errorf("%s: %d lane-mask tables %v, want 1", name, len(tables), tables)
		}
	}
}
