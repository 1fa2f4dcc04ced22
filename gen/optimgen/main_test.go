package main

import (
	"path/filepath"
	"testing"

	"github.com/synthgen/synthgen/gen/avofile"
)

// TestUpToDate regenerates runtime/optim's assembly and stubs, twice, and
// requires both to equal the committed files byte for byte.
func TestUpToDate(t *testing.T) {
	if err := avofile.Stale(run, filepath.Join("..", "..", "runtime", "optim")); err != nil {
		t.Error(err)
	}
}
