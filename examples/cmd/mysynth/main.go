// Command mysynth is the synth command (train, eval, sample, inspect,
// attn, compare, info, …) over this module's specs: importing the
// generated packages links their kernels, and cli.Main does the rest.
//
//	go run ./cmd/mysynth train -spec tiny -steps 200
//	go run ./cmd/mysynth sample -ckpt tiny.safetensors
package main

import (
	"github.com/synthgen/synthgen/cli"

	_ "example.com/synthmodels/tiny"
	_ "example.com/synthmodels/wide"
)

func main() { cli.Main() }
