package main

import (
	"path/filepath"
	"testing"

	"github.com/synthgen/synthgen/gen/avofile"
)

// TestUpToDate regenerates runtime/bf16's assembly and stubs, twice, and
// requires both to equal the committed files byte for byte.
func TestUpToDate(t *testing.T) {
	if err := avofile.Stale(run, filepath.Join("..", "..", "runtime", "bf16")); err != nil {
		t.Error(err)
	}
}
