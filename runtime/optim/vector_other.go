//go:build !amd64 || purego

package optim

// vecAVX is false: a build without the AVX kernels sums and decays in Go.
var vecAVX = false

func sumSquaresAVX(x *float32, n int, acc *[4]float64) {
	panic("optim: AVX kernel in a build without it")
}

func scaleAVX(p *float32, n int, d float32) { panic("optim: AVX kernel in a build without it") }
