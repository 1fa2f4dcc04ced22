// Command repogen regenerates what the synthgen repository generates for
// itself, as its own //go:generate lines run it: the package of each spec
// in specs/ (-all, or -spec without -out), the package that links them all
// (generated/all, -index), and the benchmarks' FMA-peak kernels (-peak).
// Users generate their packages with cmd/synthgen.
//
//	repogen -spec specs/small.json                  -out defaults to generated/small
//	repogen -all                                    every spec in specs/, and generated/all
//	repogen -index specs -out generated/all         only the package that links every spec
//	repogen -peak DIR [-pkg NAME]                   the FMA-peak kernels (fma_amd64.s and stubs)
//
// It works only inside the synthgen module (its go.mod says module
// github.com/synthgen/synthgen), which internal/ already ensures for go run.
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
	debug.SetGCPercent(400) // as cmd/synthgen: see there
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "repogen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("repogen", flag.ContinueOnError)
	specPath := fs.String("spec", "", "spec file to generate from")
	out := fs.String("out", "", "output directory (-spec: default generated/<name>; -index: required)")
	pkg := fs.String("pkg", "", "package name of the generated files (-spec, -peak)")
	all := fs.Bool("all", false, "generate every spec in specs/, and generated/all")
	index := fs.String("index", "", "write only the package that links every spec of this directory, to -out")
	peak := fs.String("peak", "", "write the FMA-peak benchmark kernels into this directory")
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
	if modes != 1 {
		return errors.New("give one of -spec FILE, -all, -index DIR -out DIR and -peak DIR")
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
		root, err := selfRoot()
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
		if *out == "" {
			return errors.New("-index needs -out")
		}
		list, err := gen.LoadAll(*index)
		if err != nil {
			return err
		}
		return gen.WriteIndex(list, *index, *out)
	}
	s, err := specs.Load(*specPath)
	if err != nil {
		return err
	}
	dir := *out
	if dir == "" {
		root, err := selfRoot()
		if err != nil {
			return fmt.Errorf("%w; give -out DIR", err)
		}
		dir = filepath.Join(root, "generated", s.Name)
	}
	return gen.Write(s, *specPath, dir, *pkg)
}

// selfRoot returns the root of the synthgen module, the nearest directory
// above the working directory whose go.mod says module
// github.com/synthgen/synthgen.
func selfRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		gomod := filepath.Join(dir, "go.mod")
		data, err := os.ReadFile(gomod)
		if err == nil {
			if mod := modfile.ModulePath(data); mod != selfModule {
				return "", fmt.Errorf("repogen works only inside the synthgen module, and %s is module %q", gomod, mod)
			}
			return dir, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("read %s: %w", gomod, err)
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("repogen works only inside the synthgen module, and there is no go.mod above the working directory")
		}
		dir = up
	}
}
