//go:build !amd64

package kerneltest

import "runtime"

// noAsm is why this build has no assembly kernels; empty: it has them.
const noAsm = "the generated assembly is for amd64 and this is GOARCH=" + runtime.GOARCH
