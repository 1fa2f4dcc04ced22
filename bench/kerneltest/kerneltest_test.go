package kerneltest

import (
	"testing"

	"github.com/synthgen/synthgen/generated/odd"
)

// TestForwards runs the forwarded Test on one package, as a package
// generated before the move calls it.
func TestForwards(t *testing.T) {
	Test(t, odd.Spec)
	cases, err := Cases(odd.Spec, "TriDot")
	if err != nil || len(cases) == 0 {
		t.Fatalf("Cases: %v, %v", cases, err)
	}
}
