//go:build amd64 && !purego

package kerneltest

// noAsm is why this build has no assembly kernels; empty: it has them.
const noAsm = ""
