// Package avofile writes a runtime package's spec-independent assembly,
// built with avo, as the pair of files its generator owns
// (kernels_amd64.s and its Go stubs, kernels_amd64.go), and tells whether
// the committed pair is stale. The generators of runtime/bf16
// (gen/bf16gemm) and runtime/optim (gen/optimgen) share it.
package avofile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/pass"
	"github.com/mmcloughlin/avo/printer"
)

// Names are the files Write writes, in a package's directory.
var Names = []string{"kernels_amd64.s", "kernels_amd64.go"}

// Write compiles ctx and writes its assembly and stubs into dir, for
// package pkg, their header naming the command argv that made them.
func Write(ctx *build.Context, dir, pkg string, argv ...string) error {
	asmFile, err := os.Create(filepath.Join(dir, Names[0]))
	if err != nil {
		return err
	}
	defer asmFile.Close()
	stubFile, err := os.Create(filepath.Join(dir, Names[1]))
	if err != nil {
		return err
	}
	defer stubFile.Close()
	pc := printer.Config{Argv: argv, Pkg: pkg}
	bc := &build.Config{ErrOut: os.Stderr, MaxErrors: 10, Passes: []pass.Interface{
		pass.Compile,
		&pass.Output{Writer: asmFile, Printer: printer.NewGoAsm(pc)},
		&pass.Output{Writer: stubFile, Printer: printer.NewStubs(pc)},
	}}
	if build.Main(bc, ctx) != 0 {
		return fmt.Errorf("avo build of package %s failed", pkg)
	}
	return nil
}

// Stale regenerates with run into a temporary directory, twice, and
// returns an error naming each file of Names that differs from the one in
// dir (the committed package), or that differs between the two runs.
func Stale(run func(dir string) error, dir string) error {
	var bad []string
	var first [][]byte
	for round := range 2 {
		tmp, err := os.MkdirTemp("", "avofile")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if err := run(tmp); err != nil {
			return fmt.Errorf("regenerating: %w", err)
		}
		for i, name := range Names {
			got, err := os.ReadFile(filepath.Join(tmp, name))
			if err != nil {
				return err
			}
			want, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				return err
			}
			if round == 0 {
				first = append(first, got)
			} else if !bytes.Equal(got, first[i]) {
				bad = append(bad, name+" (not reproducible)")
			}
			if round == 0 && !bytes.Equal(got, want) {
				bad = append(bad, name)
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("stale in %s: %v (run go generate there)", dir, bad)
	}
	return nil
}
