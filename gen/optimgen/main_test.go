package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestUpToDate regenerates runtime/optim's assembly and stubs into a
// temporary directory, twice, and requires both to equal the committed
// files byte for byte.
func TestUpToDate(t *testing.T) {
	for range 2 {
		dir := t.TempDir()
		if err := run(dir); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"kernels_amd64.s", "kernels_amd64.go"} {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("..", "..", "runtime", "optim", name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("runtime/optim/%s is stale: run go generate ./runtime/optim", name)
			}
		}
	}
}
