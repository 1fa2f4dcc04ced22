package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestUpToDate regenerates the assembly and stubs into a temporary
// directory and requires them to equal the committed files, byte for byte.
func TestUpToDate(t *testing.T) {
	dir := t.TempDir()
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kernels_amd64.s", "kernels_amd64.go"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate in gen/x86enc/bf16proof", name)
		}
	}
}
