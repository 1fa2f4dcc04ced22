package gogen

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/specs"
)

// The shipped specs (tests/ checks their generated kernels numerically)
// leave branches of the emitters unexercised: widths above the full-unroll
// limit with remainders, widths below a chunk, FB above the limit, K = 1,
// B = 1. These configurations cover them.
var testConfigs = []specs.Spec{
	// DH 20: chunked loops with a remainder, dot loop path; K 19: dot loop
	// with remainder 1; FB 20: the tile loops' loop path.
	{Name: "c1", N: 40, D: 60, Heads: 3, Layers: 1, K: 19, A: 2, B: 20},
	// DH 4: a single short chunk; K 1; FB 1 (every column its own block).
	{Name: "c2", N: 24, D: 12, Heads: 3, Layers: 1, K: 1, A: 24, B: 1},
	// DH 16: the full-unroll limit, chunks 2×6 + 4; K 6: exactly one chunk.
	{Name: "c3", N: 36, D: 32, Heads: 2, Layers: 1, K: 6, A: 2, B: 18},
	// N 13 prime, one head of width 6 (one chunk exactly), K 13, FA 1.
	{Name: "c4", N: 13, D: 6, Heads: 1, Layers: 1, K: 13, A: 1, B: 13},
}

const allVariants = "vanilla+dense+random+factorized_random+factorized_dense"

// opsOf lists spec s's ops (all kinds) with their Func renamed so several
// configurations fit in one file.
func opsOf(s specs.Spec) []catalog.Op {
	s.Variant = allVariants
	s.Vocab, s.FFN = 256, 4*s.D
	ops := catalog.Ops(&s)
	for i := range ops {
		ops[i].Func += "_" + s.Name
	}
	return ops
}

func render(t *testing.T, f *jen.File) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	return buf.Bytes()
}

// TestSignatures checks that every kind is emitted as a function named
// Name(op) whose parameter list, printed, is exactly the catalog's.
func TestSignatures(t *testing.T) {
	f := jen.NewFile("p")
	seen := map[catalog.Kind]bool{}
	var ops []catalog.Op
	for _, s := range testConfigs {
		for _, op := range opsOf(s) {
			if err := Emit(f, op, catalog.ConfigOf(&s)); err != nil {
				t.Fatal(err)
			}
			ops = append(ops, op)
			seen[op.Kind] = true
		}
	}
	for _, k := range catalog.Kinds() {
		if k <= catalog.TriDot && !seen[k] {
			t.Errorf("kind %s not emitted by the test configurations", k)
		}
	}
	src := render(t, f)
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "kernels.go", src, parser.ParseComments)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	decls := map[string]*ast.FuncDecl{}
	for _, d := range file.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			decls[fd.Name.Name] = fd
		}
	}
	for _, op := range ops {
		fd, ok := decls[Name(op)]
		if !ok {
			t.Errorf("%s: no function %s", op.Field, Name(op))
			continue
		}
		var buf bytes.Buffer
		if err := printer.Fprint(&buf, fset, fd.Type); err != nil {
			t.Fatal(err)
		}
		if got, want := buf.String(), op.Sig(); got != want {
			t.Errorf("%s: signature %s, want %s", Name(op), got, want)
		}
		if fd.Doc == nil || !strings.HasPrefix(fd.Doc.Text(), Name(op)+" ") {
			t.Errorf("%s: no doc comment starting with its name", Name(op))
		}
	}
}

// TestEveryKind checks that every kind of the catalog has a Go emitter.
func TestEveryKind(t *testing.T) {
	for _, k := range catalog.Kinds() {
		if emitters[k] == nil {
			t.Errorf("kind %s has no Go emitter", k)
		}
	}
}

// TestEmitUnknownKind checks that a kind without an emitter is an error,
// not a silent gap.
func TestEmitUnknownKind(t *testing.T) {
	err := Emit(jen.NewFile("p"), catalog.Op{Kind: catalog.Kind(1 << 20)}, catalog.Config{})
	if err == nil {
		t.Fatal("Emit accepted an unknown kind")
	}
}

// TestEmittedKernelsRun compiles the kernels of testConfigs with a driver
// (testdata/driver.go.txt) that compares each, at several lengths, with a
// float64 reference inside NaN guards, and runs it.
func TestEmittedKernelsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command to build the driver")
		}
	}
	driver, err := os.ReadFile(filepath.Join("testdata", "driver.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	kf := jen.NewFile("main")
	var cfgs strings.Builder
	cfgs.WriteString("package main\n\nvar configs = []config{\n")
	for _, s := range testConfigs {
		cfg := catalog.ConfigOf(&s)
		byField := map[string]catalog.Op{}
		for _, op := range opsOf(s) {
			if err := Emit(kf, op, cfg); err != nil {
				t.Fatal(err)
			}
			byField[op.Field] = op
		}
		fn := func(field string) string { return Name(byField[field]) }
		fmt.Fprintf(&cfgs, "\t{name: %q, n: %d, d: %d, dh: %d, fa: %d, fb: %d, la: %d, lb: %d,\n",
			s.Name, s.N, s.D, s.DH(), s.A, s.B, s.Heads*s.A, s.Heads*s.B)
		fmt.Fprintf(&cfgs, "\t\tsv: %s, svb: %s, tile: %s, tileBack: %s, scale: %s, axpy: %s, dot: %s,\n",
			fn("SoftmaxValue"), fn("SoftmaxValueBack"), fn("FactDenseLogits"), fn("FactDenseLogitsBack"),
			fn("TriScale"), fn("TriAxpy"), fn("TriDot"))
		fmt.Fprintf(&cfgs, "\t\tffn: %d, ln: %s, lnBack: %s, lnGrad: %s, gelu: %s, geluBack: %s,\n",
			cfg.FFN, fn("LayerNorm"), fn("LayerNormBack"), fn("LayerNormGrad"), fn("Gelu"), fn("GeluBack"))
		cfgs.WriteString("\t\tproducts: []product{\n")
		for _, fam := range []string{"VanillaLogits", "DenseLogits", "FactRandomLogits"} {
			op := byField[fam]
			fmt.Fprintf(&cfgs, "\t\t\t{%q, %d, %d, %d, %s, %s, %s},\n", fam, op.W, op.LX, op.LW,
				fn(fam), fn(fam+"BackX"), fn(fam+"BackW"))
		}
		cfgs.WriteString("\t\t}},\n")
	}
	cfgs.WriteString("}\n")

	dir := t.TempDir()
	files := map[string][]byte{
		"go.mod":     []byte("module driver\n\ngo 1.22\n"),
		"kernels.go": render(t, kf),
		"configs.go": []byte(cfgs.String()),
		"main.go":    driver,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goBin, "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.HasSuffix(bytes.TrimSpace(out), []byte("ok")) {
		t.Fatalf("driver: %v\n%s", err, out)
	}
}
