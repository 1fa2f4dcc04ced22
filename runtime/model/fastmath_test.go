package model

import (
	"math"
	"testing"
)

func TestExp32(t *testing.T) {
	worst := 0.0
	for x := float32(-87); x <= 88; x += 0.001 {
		got := float64(exp32(x))
		want := math.Exp(float64(x))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 3e-7 {
		t.Fatalf("exp32: worst relative error %.3g > 3e-7", worst)
	}
	if exp32(-100) != 0 || math.IsInf(float64(exp32(100)), 0) || math.IsNaN(float64(exp32(100))) {
		t.Fatalf("exp32 out of range: %v %v", exp32(-100), exp32(100))
	}
}
