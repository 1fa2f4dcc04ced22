package gen

import (
	"fmt"

	"github.com/mmcloughlin/avo/ir"

	"github.com/synthgen/synthgen/gen/asmgen"
	"github.com/synthgen/synthgen/specs"
)

// MaxInstructions bounds the assembly of one generated package: the
// instructions (and labels) of every kernel at every level. Some kernels
// unroll over the spec's sizes (a head's width d/heads, above all), so a
// valid spec can ask for far more code than any machine should compile:
// d 8192 with one head is over 300,000, and compiling it (register
// allocation) would take long and much memory. Render refuses such a spec
// as soon as the emitted code passes the bound, before compiling it. The
// largest shipped specs (long1024_dense and its peers) emit about 24,000;
// the bound allows about 8 times that, which renders in a few seconds.
const MaxInstructions = 200_000

// checkSize is the error for assembly emitted so far in af that exceeds
// MaxInstructions, naming spec s and the bound.
func checkSize(s *specs.Spec, af *asmgen.File) error {
	n := emitted(af)
	if n <= MaxInstructions {
		return nil
	}
	return fmt.Errorf("spec %s: its kernels exceed the generator's limit of %d assembly instructions (%d emitted when it stopped, before compiling): "+
		"they unroll over the spec's sizes, the head width d/heads = %d above all; use more heads or a smaller d",
		s.Name, MaxInstructions, n, s.DH())
}

// emitted counts the instructions and labels emitted in af's functions.
func emitted(af *asmgen.File) int {
	f, _ := af.Ctx.Result() // its errors are Render's, after the emission
	n := 0
	for _, sec := range f.Sections {
		if fn, ok := sec.(*ir.Function); ok {
			n += len(fn.Nodes)
		}
	}
	return n
}
