package gen

import (
	"fmt"

	"github.com/synthgen/synthgen/gen/asmgen"
)

// WritePeak writes the FMA-throughput kernels (asmgen.PeakFile) into dir:
// fma_amd64.s and its stubs fma_amd64.go. pkg is their package name; ""
// means the package of dir's other Go files, or kernelbench if there are none.
// It writes by the rules of writeFiles, so dir's other files stay as they
// are.
func WritePeak(dir, pkg string) error {
	info, err := scanDir(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if pkg, err = resolvePkg(info, pkg, "kernelbench"); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	asm, stubs, err := compileAsm(asmgen.PeakFile(), pkg, []string{"synthgen", "-peak", pkg})
	if err != nil {
		return fmt.Errorf("peak kernels: %w", err)
	}
	files := map[string][]byte{"fma_amd64.s": asm, "fma_amd64.go": stubs}
	return writeFiles(dir, files, synthgenHeader+"-peak ")
}
