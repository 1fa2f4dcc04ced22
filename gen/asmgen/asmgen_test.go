package asmgen

import (
	"testing"

	"github.com/synthgen/synthgen/gen/catalog"
)

// TestEveryKind checks that every kind of the catalog has an assembly
// emitter.
func TestEveryKind(t *testing.T) {
	for _, k := range catalog.Kinds() {
		if emitters[k] == nil {
			t.Errorf("kind %s has no assembly emitter", k)
		}
	}
}
