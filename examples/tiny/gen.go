package tiny

// The kernels of spec tiny.json: n 64, d 64, 2 heads, 2 layers, random
// synthesizer. `go generate ./...` writes them beside this file.

//go:generate go tool synthgen -spec tiny.json -out .
