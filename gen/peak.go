package gen

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/synthgen/synthgen/gen/asmgen"
)

// WritePeak writes the FMA-throughput kernels (asmgen.PeakFile) into dir
// as package pkg: fma_amd64.s and its stubs fma_amd64.go.
func WritePeak(dir, pkg string) error {
	asm, stubs, err := compileAsm(asmgen.PeakFile(), pkg, []string{"synthgen", "-peak", "bench"})
	if err != nil {
		return fmt.Errorf("peak kernels: %w", err)
	}
	for name, data := range map[string][]byte{"fma_amd64.s": asm, "fma_amd64.go": stubs} {
		if err := writeFileAtomic(filepath.Join(dir, name), data); err != nil {
			return err
		}
	}
	return nil
}

// writeFileAtomic writes data to path through a temporary file and a rename.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
