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
//	synthgen -peak DIR [-pkg NAME]                   the FMA-peak kernels of the benchmarks
//
// Inside the synthgen module itself (its go.mod says module
// github.com/synthgen/synthgen) there is more; elsewhere these are errors:
//
//	synthgen -spec specs/small.json                  -out defaults to generated/small
//	synthgen -all                                    every spec in specs/, and generated/all
//	synthgen -index specs -out generated/all         only the package that links every spec
//
// A bad spec is an error naming the file, the field, the value and the rule;
// nothing is written then.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	"golang.org/x/mod/modfile"

	"github.com/synthgen/synthgen/gen"
	"github.com/synthgen/synthgen/specs"
)

// selfModule is synthgen's module path.
const selfModule = "github.com/synthgen/synthgen"

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
	specPath := fs.String("spec", "", "spec file to generate from")
	out := fs.String("out", "", "output package directory (required, except inside the synthgen module: generated/<name>)")
	pkg := fs.String("pkg", "", "package name of the generated files (default: that of the output directory's Go files, else the spec's name)")
	all := fs.Bool("all", false, "inside the synthgen module: generate every spec in specs/, and generated/all")
	index := fs.String("index", "", "inside the synthgen module: write only the package that links every spec of this directory, to -out")
	peak := fs.String("peak", "", "write the FMA-peak benchmark kernels into this directory (package: -pkg, else the directory's, else bench)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	modes := 0
	for _, on := range []bool{*specPath != "", *all, *index != "", *peak != ""} {
		if on {
			modes++
		}
	}
	if modes > 1 {
		return errors.New("give only one of -spec, -all, -index and -peak")
	}
	if *pkg != "" && (*all || *index != "") {
		return errors.New("-pkg goes with -spec or -peak")
	}
	switch {
	case *peak != "":
		if *out != "" {
			return errors.New("-peak names the output directory; drop -out")
		}
		return gen.WritePeak(*peak, *pkg)
	case *all:
		if *out != "" {
			return errors.New("-all writes under generated/; drop -out")
		}
		root, err := selfRoot("-all")
		if err != nil {
			return err
		}
		dir := filepath.Join(root, "specs")
		list, err := gen.LoadAll(dir)
		if err != nil {
			return err
		}
		for _, l := range list {
			if err := gen.Write(l.Spec, l.Path, filepath.Join(root, "generated", l.Spec.Name), ""); err != nil {
				return err
			}
		}
		return gen.WriteIndex(list, dir, filepath.Join(root, "generated", "all"))
	case *index != "":
		if _, err := selfRoot("-index"); err != nil {
			return err
		}
		if *out == "" {
			return errors.New("-index needs -out")
		}
		list, err := gen.LoadAll(*index)
		if err != nil {
			return err
		}
		return gen.WriteIndex(list, *index, *out)
	case *specPath != "":
		s, err := specs.Load(*specPath)
		if err != nil {
			return err
		}
		dir := *out
		if dir == "" {
			root, err := selfRoot("-spec without -out")
			if err != nil {
				return fmt.Errorf("%w; give -out DIR (-out . in a go:generate line)", err)
			}
			dir = filepath.Join(root, "generated", s.Name)
		}
		return gen.Write(s, *specPath, dir, *pkg)
	}
	fs.Usage()
	return errors.New("give -spec FILE -out DIR, or -peak DIR; inside the synthgen module also -all or -index DIR")
}

// selfRoot returns the root of the synthgen module when the working
// directory is inside it (the nearest go.mod above it says module
// github.com/synthgen/synthgen); elsewhere what, which only works there,
// is an error.
func selfRoot(what string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		gomod := filepath.Join(dir, "go.mod")
		data, err := os.ReadFile(gomod)
		if err == nil {
			if mod := modfile.ModulePath(data); mod != selfModule {
				return "", fmt.Errorf("%s works only inside the synthgen module, and %s is module %q", what, gomod, mod)
			}
			return dir, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("read %s: %w", gomod, err)
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("%s works only inside the synthgen module, and there is no go.mod above the working directory", what)
		}
		dir = up
	}
}
