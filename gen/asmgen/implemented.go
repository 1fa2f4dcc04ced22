package asmgen

import (
	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// Implemented reports whether kind k has an emitter at level isa.
func Implemented(k catalog.Kind, isa kernels.ISA) bool {
	return implemented[k]
}

// implemented lists the kinds whose emitters are written. Each emitter
// file adds its kinds here when it is complete.
var implemented = map[catalog.Kind]bool{}
