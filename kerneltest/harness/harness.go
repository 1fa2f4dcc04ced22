// Package harness calls a kernel in guarded buffers: every slice argument
// sits, misaligned, in a buffer of NaN canaries, its entries the kernel
// may not touch canaries too, its overwritten outputs filled with another
// NaN marker; after the call every float the kernel may not write is
// checked bit for bit, and the entries it may write are returned. The
// kernel tests of generated packages (package kerneltest) and the
// repository's suite against float64 references (tests/) both call kernels
// through it.
package harness

import (
	"fmt"
	"math"
	"strings"

	"github.com/synthgen/synthgen/gen/catalog"
)

const (
	// Lead is the number of guard floats before every slice's buffer
	// region; it also misaligns the slice.
	Lead = 1
	// Tail is the number of guard floats after every region.
	Tail = 19
	// CanaryBits fills every float a kernel must not touch: a NaN, so a
	// kernel that reads one into its arithmetic poisons its output.
	CanaryBits = 0x7fa5a5a5
	// UnwrittenBits fills the entries of an overwritten output before the
	// call: a NaN that fails every comparison if the kernel leaves it.
	UnwrittenBits = 0x7fb0b0b0
)

var (
	// Canary is the float of CanaryBits.
	Canary = math.Float32frombits(CanaryBits)
	// Unwritten is the float of UnwrittenBits.
	Unwritten = math.Float32frombits(UnwrittenBits)
)

// IsMarker reports whether x is one of the two markers.
func IsMarker(x float32) bool {
	b := math.Float32bits(x)
	return b == CanaryBits || b == UnwrittenBits
}

// Fmt formats a float of a guarded buffer: "guard", "unwritten", or its
// value.
func Fmt(x float32) string {
	switch math.Float32bits(x) {
	case CanaryBits:
		return "guard"
	case UnwrittenBits:
		return "unwritten"
	}
	return fmt.Sprintf("%.9g", x)
}

// Operand is one slice argument of a call.
type Operand struct {
	Name string
	Role catalog.Role
	// Len is the slice's length; Offset is where it starts in its buffer
	// region (a head's column offset), Span the length of the region,
	// at least Offset+Len (every row whole), after which the Tail guards
	// follow.
	Len, Offset, Span int
	// Active are the slice indices of the entries the kernel reads or
	// writes, in the order of Vals and of the outputs Exercise returns.
	Active []int
	// Vals are the active entries' values before the call (for In and
	// Acc; Out entries start as Unwritten).
	Vals []float32
	// Stride, when positive, is the row stride reports locate entries by.
	Stride int
	// Alias names an earlier operand whose buffer this one shares (with
	// the same placement): the kernel gets the same slice twice.
	Alias string
	// Empty passes an empty slice: an optional argument turned off.
	Empty bool
}

// buffer is one allocation and what the kernel may do to each float.
type buffer struct {
	data     []float32
	before   []uint32
	writable []bool
	owner    []*Operand // the operand whose active entry a float is
}

// Result is what a call did.
type Result struct {
	// Out maps each operand that is not In (and not Empty) to its active
	// entries after the call, in Active order.
	Out map[string][]float32
	// Ret is the kernel's result (0 for kernels without one).
	Ret float32
	// Problems lists the floats changed that the kernel may not write:
	// guards, gaps between rows, entries of read-only inputs.
	Problems []string
}

// Exercise lays the operands out in guarded, misaligned buffers, calls
// call with the slices by operand name, and returns what it did.
func Exercise(ops []*Operand, call func(slices map[string][]float32) float32) Result {
	bufs := map[string]*buffer{}
	for _, op := range ops {
		if op.Alias != "" {
			b, ok := bufs[op.Alias]
			if !ok {
				panic("harness: alias of unknown operand " + op.Alias)
			}
			bufs[op.Name] = b
			continue
		}
		b := &buffer{data: make([]float32, Lead+max(op.Span, op.Offset+op.Len)+Tail)}
		for i := range b.data {
			b.data[i] = Canary
		}
		if !op.Empty {
			for k, j := range op.Active {
				v := Unwritten
				if op.Role != catalog.Out {
					v = op.Vals[k]
				}
				b.data[Lead+op.Offset+j] = v
			}
		}
		b.before = make([]uint32, len(b.data))
		for i, v := range b.data {
			b.before[i] = math.Float32bits(v)
		}
		b.writable = make([]bool, len(b.data))
		b.owner = make([]*Operand, len(b.data))
		bufs[op.Name] = b
	}
	slices := map[string][]float32{}
	for _, op := range ops {
		b := bufs[op.Name]
		if op.Empty {
			slices[op.Name] = b.data[Lead:Lead:Lead]
			continue
		}
		start := Lead + op.Offset
		slices[op.Name] = b.data[start : start+op.Len]
		for _, j := range op.Active {
			i := start + j
			if b.owner[i] == nil {
				b.owner[i] = op
			}
			if op.Role != catalog.In {
				b.writable[i] = true
			}
		}
	}
	res := Result{Ret: call(slices), Out: map[string][]float32{}}

	seen := map[*buffer]bool{}
	for _, op := range ops {
		b := bufs[op.Name]
		if seen[b] {
			continue
		}
		seen[b] = true
		var outside, input []string
		nOutside, nInput := 0, 0
		for i, v := range b.data {
			if b.writable[i] || math.Float32bits(v) == b.before[i] {
				continue
			}
			was := math.Float32frombits(b.before[i])
			if o := b.owner[i]; o != nil {
				if nInput < maxReports {
					input = append(input, fmt.Sprintf("%s: %s → %s", o.where(i-Lead-o.Offset), Fmt(was), Fmt(v)))
				}
				nInput++
				continue
			}
			if nOutside < maxReports {
				outside = append(outside, fmt.Sprintf("%s = %s", op.where(i-Lead-op.Offset), Fmt(v)))
			}
			nOutside++
		}
		if nOutside > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: wrote %d floats outside the entries it may write: %s", op.Name, nOutside, strings.Join(outside, "; ")))
		}
		if nInput > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: changed %d floats of a read-only input: %s", op.Name, nInput, strings.Join(input, "; ")))
		}
	}
	for _, op := range ops {
		if op.Role == catalog.In || op.Empty {
			continue
		}
		b := bufs[op.Name]
		v := make([]float32, len(op.Active))
		for k, j := range op.Active {
			v[k] = b.data[Lead+op.Offset+j]
		}
		res.Out[op.Name] = v
	}
	return res
}

// maxReports is how many floats each kind of problem lists.
const maxReports = 3

// Where locates slice index j of the operand for a report.
func (op *Operand) Where(j int) string { return op.where(j) }

func (op *Operand) where(j int) string {
	switch {
	case j < -op.Offset:
		return fmt.Sprintf("%d before the buffer", -op.Offset-j)
	case j < 0:
		return fmt.Sprintf("%d before the slice", -j)
	case j >= max(op.Span-op.Offset, op.Len):
		return fmt.Sprintf("%d past the region", j-max(op.Span-op.Offset, op.Len)+1)
	case op.Stride > 0:
		r, c := (j+op.Offset)/op.Stride, (j+op.Offset)%op.Stride
		return fmt.Sprintf("%s[%d] (row %d, buffer column %d)", op.Name, j, r, c)
	}
	return fmt.Sprintf("%s[%d]", op.Name, j)
}

// Shape is a catalog shape at length t as a harness placement: the slice
// length, the active entries in row order, and the row stride. A shape of
// −1 rows and −1 width is the causal triangle (row r has r + 1 entries),
// unless it is Square (t entries per row).
func Shape(sh catalog.Shape, t int) (length int, active []int) {
	length = sh.Need(t)
	if length == 0 {
		return 0, nil
	}
	rows := sh.Rows
	if rows < 0 {
		rows = t
	}
	for r := 0; r < rows; r++ {
		w := sh.Width
		switch {
		case sh.Triangle():
			w = r + 1
		case w < 0:
			w = t
		}
		for p := 0; p < w; p++ {
			active = append(active, r*sh.Stride+p)
		}
	}
	return length, active
}
