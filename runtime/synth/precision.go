package synth

import (
	"fmt"
	"strings"

	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// PrecisionKind is the number format of the linear layers' (and
// aft_full's) products in training.
type PrecisionKind int

const (
	// F32 runs every product in float32 (the default).
	F32 PrecisionKind = iota
	// BF16 runs the linear layers' products (forward and both backward
	// products), aft_full's (its weights' product with the keys and
	// values, forward, and both backward products) and random's, fixed
	// random's and factorized random's attention products (P·V, forward,
	// and both backward products) with bf16 operands, rounded to nearest even, and float32
	// accumulation and output, on AMX or AVX512-BF16. The weights (the
	// float32 master copy), gradients, optimizer state, softmax, LayerNorm,
	// losses and checkpoints stay float32. On a CPU with neither (or with
	// SYNTHGEN_ISA below avx512, or SYNTHGEN_BF16=none) the run stays
	// float32 and Plan.Notes says why.
	BF16
)

func (p PrecisionKind) String() string {
	switch p {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("PrecisionKind(%d)", int(p))
}

// ParsePrecision reads a precision as the command line spells it: f32
// (or float32, fp32) or bf16.
func ParsePrecision(s string) (PrecisionKind, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "f32", "float32", "fp32":
		return F32, nil
	case "bf16", "bfloat16":
		return BF16, nil
	}
	return 0, fmt.Errorf("unknown precision %q (want f32 or bf16)", s)
}

// Precision sets the number format of the linear layers' (and aft_full's)
// products in training (F32, the default, or BF16).
func Precision(p PrecisionKind) Option {
	return setter("precision", func(o *options) { o.precision = p })
}

// BF16Level is the bf16 level a run of precision BF16 would use here with
// kernels at level isa: AMX when the CPU has it and the OS grants the tile
// state (asked once per process), else AVX512-BF16, else bf16.None with
// the reason. A level isa below kernels.AVX512 (SYNTHGEN_ISA or the ISA
// option) allows none, and SYNTHGEN_BF16 caps it further.
func BF16Level(isa kernels.ISA) (bf16.Level, error) { return bf16.ForISA(isa) }

// setPrecision gives m's linear layers the bf16 kernel when p is BF16 and
// one runs here; otherwise it returns a note saying why training stays
// float32 (empty for F32).
func setPrecision(m *Model, p PrecisionKind) (precision, note string, err error) {
	m.net.SetBF16(nil)
	if p != BF16 {
		return "f32", "", nil
	}
	l, why := BF16Level(m.net.Kernels.ISA)
	if l == bf16.None {
		return "f32", fmt.Sprintf("precision bf16 asked for, but %v: training in float32", why), nil
	}
	k, err := bf16.New(l)
	if err != nil {
		return "", "", fmt.Errorf("precision bf16: %w", err)
	}
	m.net.SetBF16(k)
	if l == bf16.AVX512BF16 {
		if err := bf16.Available(bf16.AMX); err != nil { // not merely capped: say why AMX is not used
			note = fmt.Sprintf("precision bf16 on avx512bf16, not AMX: %v; this level's step measured 1.30–1.94× the float32 one "+
				"on an AMD EPYC (Zen 4), whose VDPBF16PS does twice its FMAs' multiply-adds, and 0.65–0.74× on a Xeon whose "+
				"VDPBF16PS runs no faster than its FMAs (`synth steps -precision bf16` measures both here)", err)
		}
	}
	return "bf16 (" + l.String() + ")", note, nil
}

// restorePrecision takes the precision a resumed run asked for from its
// optimizer state's metadata (older files, without the entry, resume in
// float32 unless an option says otherwise), unless the Precision option
// sets one; one that differs from the saved run's gets a note.
func (o *options) restorePrecision(meta map[string]string, file string, plan *Plan) error {
	v, ok := meta[keyPrecision]
	if !ok {
		return nil
	}
	saved, err := ParsePrecision(v)
	if err != nil {
		return fmt.Errorf("resume: %s: metadata %q: %w", file, keyPrecision, err)
	}
	switch {
	case !o.set["precision"]:
		o.precision = saved
	case o.precision != saved:
		plan.Notes = append(plan.Notes, fmt.Sprintf("precision %v overrides the saved run's %v: the result will differ from an uninterrupted run", o.precision, saved))
	}
	return nil
}
