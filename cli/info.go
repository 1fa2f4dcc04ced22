package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/synth"
)

// runInfo prints which specs this program links and, per kernel, the
// instruction set dispatch picked on this CPU.
func infoCmd(e *env, args []string) error {
	fs := newFlagSet(e, "info", "Prints the instruction sets this CPU supports and the dispatch level, then every linked spec\n(the generated packages this program imports) with the level each of its kernels runs on.\nIt needs no linked spec.")
	only := fs.String("spec", "", "show only this linked spec (`name`)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return printInfo(e.out, *only)
}

func printInfo(w io.Writer, only string) error {
	level, err := kernels.Level()
	if err != nil {
		return err
	}
	var have []string
	for _, l := range kernels.Levels() {
		if kernels.Supported(l) {
			have = append(have, l.String())
		}
	}
	env := os.Getenv(kernels.EnvISA)
	if env == "" {
		env = "unset"
	}
	fmt.Fprintf(w, "cpu supports: %s; dispatch level: %s (%s=%s)\n", strings.Join(have, ", "), level, kernels.EnvISA, env)
	if bl, err := synth.BF16Level(level); err != nil {
		fmt.Fprintf(w, "bf16 (-precision bf16): none, the linear layers stay float32: %v\n", err)
	} else if aerr := bf16.Available(bf16.AMX); bl == bf16.AVX512BF16 && aerr != nil {
		fmt.Fprintf(w, "bf16 (-precision bf16): %s (not AMX: %v)\n", bl, aerr)
	} else {
		fmt.Fprintf(w, "bf16 (-precision bf16): %s\n", bl)
	}
	names := kernels.Names()
	if len(names) == 0 {
		fmt.Fprintln(w, "\nno spec linked: import a generated package (blank import) in the program's main.go")
	}
	if only != "" {
		if _, err := kernels.Spec(only); err != nil {
			return err
		}
		names = []string{only}
	}
	for _, name := range names {
		k, err := kernels.Lookup(name)
		if err != nil {
			return err
		}
		s := k.Spec
		fmt.Fprintf(w, "\n%s: variant %s, n %d, d %d, %d heads of %d, %d layers\n", s.Name, s.Variant, s.N, s.D, s.Heads, s.DH(), s.Layers)
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		for _, kn := range k.KernelNames() {
			fmt.Fprintf(tw, "  %s\t%s\n", kn, k.Chosen[kn])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
