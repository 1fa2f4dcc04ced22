package x86enc

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	"github.com/mmcloughlin/avo/operand"
)

// GoAsm renders in as one Go assembler line of BYTE directives followed by
// the Intel text and the required features as a comment, e.g.
//
//	BYTE $0x62; BYTE $0xf2; BYTE $0x76; BYTE $0x48; BYTE $0x52; BYTE $0xc2 // vdpbf16ps zmm0, zmm1, zmm2 (AVX512_BF16)
//
// The line has no leading tab.
func (in Inst) GoAsm() string {
	var b strings.Builder
	for i, x := range in.Bytes {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "BYTE $0x%02x", x)
	}
	if c := in.comment(); c != "" {
		b.WriteString(" // ")
		b.WriteString(c)
	}
	return b.String()
}

// comment is the Intel text followed by the required features.
func (in Inst) comment() string {
	if len(in.ISA) == 0 {
		return in.Intel
	}
	return in.Intel + " (" + strings.Join(in.ISA, ", ") + ")"
}

// Emitter adds encoded instructions to the active function of an avo
// build.Context: a comment with the Intel text and the required features,
// then one BYTE directive per byte. It keeps the first encoding error, so a
// generator can add a run of instructions and check Err once, and collects
// the features of everything it emitted (ISA).
type Emitter struct {
	Ctx *build.Context
	err error
	isa map[string]bool
}

// Add emits in unless err (or an earlier error) is set; call it as
// e.Add(x86enc.VDPBF16PS(...)).
func (e *Emitter) Add(in Inst, err error) {
	if e.err != nil {
		return
	}
	if err != nil {
		e.err = err
		return
	}
	e.Ctx.Comment(in.comment())
	if e.isa == nil {
		e.isa = map[string]bool{}
	}
	for _, f := range in.ISA {
		e.isa[f] = true
	}
	for _, x := range in.Bytes {
		e.Ctx.Instruction(&ir.Instruction{Opcode: "BYTE", Operands: []operand.Op{operand.U8(x)}})
	}
}

// Err returns the first encoding error passed to Add, or nil.
func (e *Emitter) Err() error { return e.err }

// ISA returns, sorted, the features needed by the instructions emitted so
// far (avo's "Requires:" comments do not include them).
func (e *Emitter) ISA() []string {
	out := make([]string, 0, len(e.isa))
	for f := range e.isa {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}
