//go:build !unix

package synth

func addressSpaceLimit() int64 { return 0 }
