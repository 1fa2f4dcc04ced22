// Command synthgen generates a spec's kernel package: unrolled Go, AVX2 and
// AVX-512 kernels, and their registration with the runtime.
//
// In your own module, keep the spec beside a hand-written gen.go that names
// the package and runs synthgen, either as a tool of the module:
//
//	go get -tool github.com/synthgen/synthgen/cmd/synthgen
//
//	// gen.go
//	package small
//
//	//go:generate go tool synthgen -spec model.json -out .
//
// or at a pinned version, without a tool directive:
//
//	//go:generate go run github.com/synthgen/synthgen/cmd/synthgen@VERSION -spec model.json -out .
//
// and run `go generate ./...`. synthgen writes its files (spec.go,
// checks.go, dispatch*.go, kernels_*.go, kernels_amd64.s, and kernels_test.go with
// the package's own tests and benchmarks) into -out beside
// yours and never touches a file it did not write: it overwrites or
// removes only files whose first lines carry its header "// Code generated
// by command: synthgen ... DO NOT EDIT.", skips files already up to date,
// and stops, writing nothing, if a file of yours has the name of one of its
// outputs. The generated files take the package name of the directory's
// other Go files (or -pkg, or the spec's name). When no hand-written file
// of the directory has a //go:generate line, spec.go gets one:
//
//	//go:generate go run github.com/synthgen/synthgen/cmd/synthgen -spec model.json -out .
//
// Flags:
//
//	synthgen -spec model.json -out DIR [-pkg NAME]   one spec's package, into DIR
//
// (The synthgen repository regenerates its own packages, generated/all and
// the benchmarks' FMA-peak kernels with internal/cmd/repogen.)
//
// A bad spec is an error naming the file, the field, the value and the rule;
// nothing is written then.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/synthgen/synthgen/gen"
	"github.com/synthgen/synthgen/specs"
)

func main() {
	// A short-lived process whose time goes to avo's passes, which
	// allocate freely: collecting at 5× the live heap rather than 2× takes
	// 15–40% off a long-row spec's rendering (BenchmarkRender in gen under
	// GOGC=400 and 100), for a larger heap.
	debug.SetGCPercent(400)
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "synthgen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("synthgen", flag.ContinueOnError)
	specPath := fs.String("spec", "", "spec file to generate from (required)")
	out := fs.String("out", "", "output package directory (required; -out . in a go:generate line)")
	pkg := fs.String("pkg", "", "package name of the generated files (default: that of the output directory's Go files, else the spec's name)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *specPath == "" {
		fs.Usage()
		return errors.New("give -spec FILE -out DIR")
	}
	if *out == "" {
		return errors.New("-spec needs -out DIR (-out . in a go:generate line)")
	}
	s, err := specs.Load(*specPath)
	if err != nil {
		return err
	}
	return gen.Write(s, *specPath, *out, *pkg)
}
