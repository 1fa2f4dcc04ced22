// Command synthgen generates a spec's kernel package: unrolled Go, AVX2 and
// AVX-512 kernels, and their registration with the runtime.
//
//	synthgen -spec specs/small.json -out generated/small   one spec
//	synthgen -all                                          every spec in specs/, and generated/all
//	synthgen -index specs -out generated/all               only the package that links every spec
//	synthgen -peak bench                                   the FMA-peak kernels of the benchmarks
//
// A bad spec is an error naming the file, the field, the value and the rule;
// nothing is written then. Each generated package carries a go:generate
// line that reruns this command, so `go generate ./...` regenerates all.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/synthgen/synthgen/gen"
	"github.com/synthgen/synthgen/specs"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "synthgen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("synthgen", flag.ContinueOnError)
	specPath := fs.String("spec", "", "spec file to generate from")
	out := fs.String("out", "", "output package directory (default generated/<name> under the module root)")
	all := fs.Bool("all", false, "generate every spec in the module's specs/ directory, and generated/all")
	index := fs.String("index", "", "write only the package that links every spec of this directory, to -out")
	peak := fs.String("peak", "", "write the FMA-peak benchmark kernels into this directory (package bench)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	cmdDir := filepath.Join(root, "cmd", "synthgen")
	switch {
	case *peak != "":
		return gen.WritePeak(*peak, "bench")
	case *all:
		dir := filepath.Join(root, "specs")
		list, err := gen.LoadAll(dir)
		if err != nil {
			return err
		}
		for _, l := range list {
			if err := gen.Write(l.Spec, l.Path, cmdDir, filepath.Join(root, "generated", l.Spec.Name)); err != nil {
				return err
			}
		}
		return gen.WriteIndex(list, dir, cmdDir, filepath.Join(root, "generated", "all"))
	case *index != "":
		if *out == "" {
			return errors.New("-index needs -out")
		}
		list, err := gen.LoadAll(*index)
		if err != nil {
			return err
		}
		return gen.WriteIndex(list, *index, cmdDir, *out)
	case *specPath != "":
		s, err := specs.Load(*specPath)
		if err != nil {
			return err
		}
		dir := *out
		if dir == "" {
			dir = filepath.Join(root, "generated", s.Name)
		}
		return gen.Write(s, *specPath, cmdDir, dir)
	}
	fs.Usage()
	return errors.New("give -spec FILE, -all, or -index DIR")
}

// moduleRoot finds the directory holding synthgen's go.mod, from the
// working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && len(data) > 0 {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("cannot find go.mod above the working directory: run synthgen inside the synthgen module")
		}
		dir = up
	}
}
