// Package listops generates ListOps, the nested-list arithmetic task of
// Long Range Arena (Tay et al. 2020; google-research/long-range-arena,
// lra_benchmarks/data/listops.py), as byte sequences for a byte-level
// classifier: an expression of the operators MAX, MIN, MED (median) and SM
// (sum mod 10) over the digits 0–9, labelled with its value 0–9.
//
// # Encoding
//
// One byte per LRA token, so that a sequence's length in bytes is its
// token count, the length LRA's generator measures and filters on:
//
//	LRA token   byte
//	[MAX        'X'
//	[MIN        'N'
//	[MED        'D'
//	[SM         'S'
//	]           ']'
//	0 … 9       '0' … '9'
//
// An operator byte opens a list, ']' closes it; there are no spaces. LRA
// writes "[MAX 2 9 [MIN 4 7 ] 0 ]" (its file adds parentheses that its input
// pipeline strips, and the pipeline renames ']' to "X"); here that is
// "X29N47]0]", 9 bytes for LRA's 9 tokens. [LRA] converts back.
//
// # Distribution
//
// Generation follows LRA's generate_tree: a node at depth d (the root has
// depth 1) is a digit, uniform over 0–9, with probability 3/4, or when
// d = MaxDepth; otherwise it is an operator, uniform over the four, with
// 2…MaxArgs arguments (uniform), each a node at depth d+1. So MaxDepth 10
// (LRA's default) means at most 9 nested operators. Trees are drawn until
// one's length falls in [MinLen, MaxLen] (LRA: strictly between its min and
// max) and is not a sequence already drawn (LRA draws into a set, so no
// sequence is in two splits). MED is LRA's int(np.median(args)): for an
// even count the mean of the two middle values rounded down. SM is the sum
// mod 10.
//
// The random source is PCG (math/rand/v2) seeded from the seed alone: the
// same seed and options give the same sequences.
package listops

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// The bytes of the encoding.
const (
	Max    = 'X' // [MAX: the largest argument
	Min    = 'N' // [MIN: the smallest argument
	Med    = 'D' // [MED: the median, the mean of the middle two rounded down for an even count
	SumMod = 'S' // [SM: the sum of the arguments mod 10
	Close  = ']' // ]: closes the innermost open operator
)

// operators is LRA's OPERATORS list in its order: MIN, MAX, MED, SM.
var operators = [4]byte{Min, Max, Med, SumMod}

// valueP is LRA's VALUE_P: a node below the maximum depth is an operator
// when a uniform draw r ∈ [0, 1) is ≤ valueP.
const valueP = 0.25

// Limits of the options.
const (
	MaxMaxDepth = 100     // deepest tree allowed (recursion bound)
	MaxMaxArgs  = 100     // most arguments per operator allowed
	MaxMaxLen   = 1 << 20 // longest sequence allowed
)

// Options are the generator's settings. The zero value of a field means
// its default: LRA's (MaxDepth 10, MaxArgs 10, MinLen 500, MaxLen 2000).
type Options struct {
	MaxDepth int // depth of the deepest leaf, the root at depth 1 (default 10)
	MaxArgs  int // most arguments of an operator, ≥ 2 (default 10)
	MinLen   int // shortest sequence in bytes (tokens), inclusive (default 500)
	MaxLen   int // longest sequence in bytes (tokens), inclusive (default 2000)
}

// Defaults of Options, LRA's settings.
const (
	DefaultMaxDepth = 10
	DefaultMaxArgs  = 10
	DefaultMinLen   = 500
	DefaultMaxLen   = 2000
)

// withDefaults fills the zero fields of o.
func (o Options) withDefaults() Options {
	if o.MaxDepth == 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxArgs == 0 {
		o.MaxArgs = DefaultMaxArgs
	}
	if o.MinLen == 0 {
		o.MinLen = DefaultMinLen
	}
	if o.MaxLen == 0 {
		o.MaxLen = DefaultMaxLen
	}
	return o
}

// OptionError is an option outside its range.
type OptionError struct {
	Option string // the field of Options
	Value  int
	Rule   string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("listops: %s %d: %s", e.Option, e.Value, e.Rule)
}

// Check returns an *OptionError for the first option (after defaults)
// outside its range, or for a length range no tree of that depth and
// arity can reach.
func (o Options) Check() error {
	o = o.withDefaults()
	switch {
	case o.MaxDepth < 1 || o.MaxDepth > MaxMaxDepth:
		return &OptionError{"MaxDepth", o.MaxDepth, fmt.Sprintf("must be in 1…%d", MaxMaxDepth)}
	case o.MaxArgs < 2 || o.MaxArgs > MaxMaxArgs:
		return &OptionError{"MaxArgs", o.MaxArgs, fmt.Sprintf("must be in 2…%d", MaxMaxArgs)}
	case o.MinLen < 1:
		return &OptionError{"MinLen", o.MinLen, "must be ≥ 1"}
	case o.MaxLen < o.MinLen || o.MaxLen > MaxMaxLen:
		return &OptionError{"MaxLen", o.MaxLen, fmt.Sprintf("must be in MinLen…%d (MinLen is %d)", MaxMaxLen, o.MinLen)}
	}
	if l := Longest(o.MaxDepth, o.MaxArgs); o.MinLen > l {
		return &OptionError{"MinLen", o.MinLen, fmt.Sprintf("exceeds the longest sequence of depth %d and %d arguments, %d", o.MaxDepth, o.MaxArgs, l)}
	}
	if o.MinLen > 1 && o.MaxLen < 4 {
		// Lengths 2 and 3 do not exist: an operator has ≥ 2 arguments.
		return &OptionError{"MaxLen", o.MaxLen, fmt.Sprintf("no sequence has a length in %d…%d (lengths are 1 or ≥ 4)", o.MinLen, o.MaxLen)}
	}
	return nil
}

// Longest is the length of the longest sequence with leaves at depth ≤
// maxDepth and at most maxArgs arguments per operator (saturated at
// MaxMaxLen+1).
func Longest(maxDepth, maxArgs int) int {
	l := 1
	for d := maxDepth - 1; d >= 1; d-- {
		l = 2 + maxArgs*l
		if l > MaxMaxLen {
			return MaxMaxLen + 1
		}
	}
	return l
}

// Example is one generated sequence and its value.
type Example struct {
	Text  []byte // the expression in the byte encoding
	Value int    // its value, 0–9: the label
}

// MaxTries bounds the consecutive draws that give no new sequence (too
// short, too long or drawn before) before Generate gives up; MaxWork bounds
// the bytes those draws generate (a draw stops once it passes MaxLen).
const (
	MaxTries = 1 << 20
	MaxWork  = 1 << 27
)

// Generator draws distinct sequences.
type Generator struct {
	o    Options
	rng  *rand.Rand
	seen map[string]struct{}
	buf  []byte
}

// seedStream is the PCG's second seed word.
const seedStream = 0x4c4953544f505321 // "LISTOPS!"

// NewGenerator returns a generator of sequences with options o, drawn
// from seed.
func NewGenerator(seed uint64, o Options) (*Generator, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	return &Generator{
		o:    o,
		rng:  rand.New(rand.NewPCG(seed, seedStream)),
		seen: map[string]struct{}{},
		buf:  make([]byte, 0, o.MaxLen+1),
	}, nil
}

// ErrExhausted is returned when MaxTries draws in a row gave no new
// sequence: the length range is too unlikely or holds too few sequences.
var ErrExhausted = errors.New("listops: no new sequence in the length range after many draws")

// Next returns the next sequence: a tree drawn as LRA draws it, of a
// length in [MinLen, MaxLen], and different from every sequence this
// generator returned before.
func (g *Generator) Next() (Example, error) {
	work, try := 0, 0
	for ; try < MaxTries && work <= MaxWork; try++ {
		g.buf = g.buf[:0]
		v, ok := g.tree(1)
		work += len(g.buf)
		if !ok || len(g.buf) < g.o.MinLen {
			continue
		}
		if _, dup := g.seen[string(g.buf)]; dup {
			continue
		}
		text := slices.Clone(g.buf)
		g.seen[string(text)] = struct{}{}
		return Example{Text: text, Value: v}, nil
	}
	return Example{}, fmt.Errorf("%w (%d draws, %d bytes drawn; %d distinct sequences so far; depth %d, %d arguments, lengths %d…%d)",
		ErrExhausted, try, work, len(g.seen), g.o.MaxDepth, g.o.MaxArgs, g.o.MinLen, g.o.MaxLen)
}

// tree appends a tree at depth to g.buf and returns its value; false when
// the sequence grew past MaxLen (it would be rejected, so the draw stops).
func (g *Generator) tree(depth int) (int, bool) {
	r := 1.0
	if depth < g.o.MaxDepth {
		r = g.rng.Float64()
	}
	if r > valueP {
		v := g.rng.IntN(10)
		g.buf = append(g.buf, byte('0'+v))
		return v, len(g.buf) <= g.o.MaxLen
	}
	at := len(g.buf)
	g.buf = append(g.buf, 0) // the operator, drawn after its arguments as LRA does
	if len(g.buf) > g.o.MaxLen {
		return 0, false
	}
	k := 2 + g.rng.IntN(g.o.MaxArgs-1)
	var args [MaxMaxArgs]int
	for i := range k {
		v, ok := g.tree(depth + 1)
		if !ok {
			return 0, false
		}
		args[i] = v
	}
	op := operators[g.rng.IntN(len(operators))]
	g.buf[at] = op
	g.buf = append(g.buf, Close)
	return apply(op, args[:k]), len(g.buf) <= g.o.MaxLen
}

// apply is the value of operator op over the digits args (reordered).
func apply(op byte, args []int) int {
	switch op {
	case Max:
		return slices.Max(args)
	case Min:
		return slices.Min(args)
	case Med:
		slices.Sort(args)
		k := len(args)
		if k%2 == 1 {
			return args[k/2]
		}
		return (args[k/2-1] + args[k/2]) / 2
	default: // SumMod
		s := 0
		for _, a := range args {
			s += a
		}
		return s % 10
	}
}

// Counts are the sizes of the three splits.
type Counts struct {
	Train, Val, Test int
}

// Bounds of a generated set, which is held in memory (LRA's is 100000
// sequences of up to 2000 bytes).
const (
	MaxCount = 10_000_000 // sequences in all
	MaxBytes = 1 << 32    // sequences × MaxLen
)

// Splits are the three generated splits.
type Splits struct {
	Train, Val, Test []Example
}

// Generate draws c.Train + c.Val + c.Test distinct sequences from seed and
// cuts them, in order, into the training, validation and test splits
// (LRA's defaults: 96000, 2000, 2000). The same seed, options and counts
// give the same splits.
func Generate(seed uint64, o Options, c Counts) (*Splits, error) {
	if c.Train > MaxCount || c.Val > MaxCount || c.Test > MaxCount { // before the sum can overflow
		return nil, fmt.Errorf("listops: counts %d/%d/%d (train/validation/test): at most %d sequences in all", c.Train, c.Val, c.Test, MaxCount)
	}
	if c.Train < 0 || c.Val < 0 || c.Test < 0 || c.Train+c.Val+c.Test < 1 {
		return nil, fmt.Errorf("listops: counts %d/%d/%d (train/validation/test) must be ≥ 0 with at least one sequence", c.Train, c.Val, c.Test)
	}
	g, err := NewGenerator(seed, o)
	if err != nil {
		return nil, err
	}
	total := c.Train + c.Val + c.Test
	if total > MaxCount || total*g.o.MaxLen > MaxBytes {
		return nil, fmt.Errorf("listops: %d sequences of up to %d bytes: at most %d sequences and %d bytes (count × MaxLen) in all", total, g.o.MaxLen, MaxCount, MaxBytes)
	}
	all := make([]Example, c.Train+c.Val+c.Test)
	for i := range all {
		if all[i], err = g.Next(); err != nil {
			return nil, fmt.Errorf("sequence %d of %d: %w", i+1, len(all), err)
		}
	}
	return &Splits{
		Train: all[:c.Train:c.Train],
		Val:   all[c.Train : c.Train+c.Val : c.Train+c.Val],
		Test:  all[c.Train+c.Val:],
	}, nil
}

// LRA writes text in LRA's token form, "[MAX 2 9 ]": its tokens separated
// by spaces (without the parentheses of LRA's files, which its input
// pipeline strips). A byte outside the encoding is written as %q.
func LRA(text []byte) string {
	var b strings.Builder
	for i, c := range text {
		if i > 0 {
			b.WriteByte(' ')
		}
		switch c {
		case Max:
			b.WriteString("[MAX")
		case Min:
			b.WriteString("[MIN")
		case Med:
			b.WriteString("[MED")
		case SumMod:
			b.WriteString("[SM")
		case Close:
			b.WriteByte(']')
		default:
			if c >= '0' && c <= '9' {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(&b, "%q", c)
			}
		}
	}
	return b.String()
}
