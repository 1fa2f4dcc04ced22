package catalog

import (
	"fmt"
	"reflect"

	"github.com/synthgen/synthgen/runtime/kernels"
	"path/filepath"

	"github.com/synthgen/synthgen/specs"
	"go/ast"
	"go/parser"
	"testing"
)

// TestTable checks every entry of the table: a name, a signature that
// parses with t (kc for GemmTile) first and a []float32 role only on
// slices, a binder (but for GemmTile), and a forward that is a kind.
func TestTable(t *testing.T) {
	names := map[string]bool{}
	for _, k := range Kinds() {
		e := Of(k)
		if e.Name == "" || names[e.Name] {
			t.Errorf("kind %d: name %q empty or repeated", int(k), e.Name)
		}
		names[e.Name] = true
		expr, err := parser.ParseExpr(e.Sig())
		if err != nil {
			t.Errorf("%s: signature %q: %v", k, e.Sig(), err)
		} else if _, ok := expr.(*ast.FuncType); !ok {
			t.Errorf("%s: signature %q is not a function type", k, e.Sig())
		}
		if len(e.Params) == 0 || e.Params[0].Type != Int {
			t.Errorf("%s: first parameter %v, want an int length", k, e.Params)
		}
		for _, p := range e.Params {
			if p.Type != Slice && p.Role != In {
				t.Errorf("%s: %s of type %s has a role", k, p.Name, p.Type)
			}
			if p.Type != Float32 && p.Default != 0 {
				t.Errorf("%s: %s of type %s has a default", k, p.Name, p.Type)
			}
		}
		if (e.bind == nil) != (k == GemmTile) {
			t.Errorf("%s: binder %v", k, e.bind != nil)
		}
		if e.Forward != NoKind && !e.Forward.Valid() {
			t.Errorf("%s: forward %d is not a kind", k, int(e.Forward))
		}
		if e.Strip && (len(e.Params) < 3 || e.Params[1] != (Arg{Name: "i0", Type: Int}) || e.Params[2] != (Arg{Name: "i1", Type: Int})) {
			t.Errorf("%s: a strip kind whose parameters %v do not start t, i0, i1", k, e.Params)
		}
		if e.Flat && e.RowWise {
			t.Errorf("%s: both Flat and RowWise (Flat implies row-wise)", k)
		}
	}
	if got := Of(AdamW).Sig(); got != "func(t int, p, g, m, v []float32, decay, gscale, b1, c1, b2, c2, eps, step, rbc2 float32)" {
		t.Errorf("AdamW's signature %s", got)
	}
	if got := Of(TriDot).Sig(); got != "func(t int, x, y []float32) float32" {
		t.Errorf("TriDot's signature %s", got)
	}
	if got := Of(SoftmaxRowsBack).Sig(); got != "func(t, i0, i1 int, a, g, db []float32)" {
		t.Errorf("SoftmaxRowsBack's signature %s", got)
	}
	if Kind(-1).Valid() || Kind(len(Kinds())).Valid() || Kind(99).String() != "Kind(99)" {
		t.Error("out-of-range kinds")
	}
}

// TestOpsHaveShapes checks that every op of a few specs gives a shape to
// each slice parameter of its kind, and to nothing else.
func TestOpsHaveShapes(t *testing.T) {
	for _, s := range testSpecs() {
		for _, op := range Ops(s) {
			if op.Kind == GemmTile {
				continue
			}
			shapes := map[string]bool{}
			for _, p := range op.Slices {
				shapes[p.Name] = true
			}
			n := 0
			for _, p := range op.Entry().Params {
				if p.Type != Slice {
					continue
				}
				n++
				if !shapes[p.Name] {
					t.Errorf("%s %s: no shape for %s", s.Name, op.Field, p.Name)
				}
			}
			if n != len(op.Slices) {
				t.Errorf("%s %s: %d shapes for %d slices", s.Name, op.Field, len(op.Slices), n)
			}
		}
	}
}

// testSpecs are the shipped specs (../../specs), one per variant family.
func testSpecs() []*specs.Spec {
	var out []*specs.Spec
	for _, name := range []string{"odd", "factorized_dense", "dense_vanilla", "odd_aft_full", "odd_aft_local", "odd_aft_conv", "odd_aft_simple", "odd_linear"} {
		s, err := specs.Load(filepath.Join("..", "..", "specs", name+".json"))
		if err != nil {
			panic(err)
		}
		out = append(out, s)
	}
	return out
}

// TestKindOf checks that each kind's binder accepts the kernels.*Func type
// KindOf names it by, and that KindOf tells the AFT variants apart.
func TestKindOf(t *testing.T) {
	for _, fn := range []any{kernels.SoftmaxValueFunc(nil), kernels.AFTLocalFunc(nil), kernels.AFTConvBackFunc(nil), kernels.GemmTileFunc(nil), kernels.AdamWFunc(nil)} {
		k, ok := KindOf(fn)
		if !ok || fmt.Sprintf("%sFunc", k) != reflect.TypeOf(fn).Name() {
			t.Errorf("KindOf(%T) = %s, %v", fn, k, ok)
		}
		if k != GemmTile && (Op{Kind: k}).Bind(fn, 0, nil, nil) == nil {
			t.Errorf("%s: the binder refuses %T", k, fn)
		}
	}
	if _, ok := KindOf(func() {}); ok {
		t.Error("KindOf accepted a func()")
	}
}

// TestDecoderKindsCausalOnly: a causal spec gets the decoder's one-row
// kernels (the four Gemv, an Attend, and Scores with vanilla), its
// bidirectional twin none of them and otherwise the same kernels.
func TestDecoderKindsCausalOnly(t *testing.T) {
	for _, c := range []struct {
		causal, bidi string
		decoder      []string
	}{
		{"odd", "enc_odd", []string{"AttendDH", "VanillaScores", "GemvDD", "GemvDF", "GemvFD", "GemvDV"}},
		{"odd_aft_full", "odd_enc_aft_full", []string{"AttendKV", "GemvDD", "GemvDF", "GemvFD", "GemvDV"}},
		{"odd_linear", "odd_enc_linear", []string{"GemvDD", "GemvDF", "GemvFD", "GemvDV"}},
	} {
		fields := func(name string) (dec, rest []string) {
			s, err := specs.Load(filepath.Join("..", "..", "specs", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range Ops(s) {
				if op.Kind.Decoder() {
					dec = append(dec, op.Field)
				} else {
					rest = append(rest, op.Field)
				}
			}
			return dec, rest
		}
		cd, cr := fields(c.causal)
		bd, br := fields(c.bidi)
		if fmt.Sprint(cd) != fmt.Sprint(c.decoder) {
			t.Errorf("%s's decoder kernels %v, want %v", c.causal, cd, c.decoder)
		}
		if len(bd) != 0 {
			t.Errorf("%s (bidirectional) has decoder kernels %v", c.bidi, bd)
		}
		if fmt.Sprint(cr) != fmt.Sprint(br) {
			t.Errorf("%s's other kernels %v differ from %s's %v", c.bidi, br, c.causal, cr)
		}
	}
}
