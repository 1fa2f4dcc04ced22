package kernels_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

func registryTestSpec(name string) specs.Spec {
	return specs.Spec{Name: name, Variant: "random", N: 8, D: 8, Heads: 1, Layers: 1, FFN: 32, Vocab: 256}
}

// TestRegistryNamesPackages: a name registered twice is an error naming
// both registering packages, and a spec differing from the linked one
// names the linked package and says what to do.
func TestRegistryNamesPackages(t *testing.T) {
	const pkg = "github.com/synthgen/synthgen/runtime/kernels_test"
	s := registryTestSpec("registry_test_one")
	kernels.Register(s)
	if got, err := kernels.PackageOf(s.Name); err != nil || got != pkg {
		t.Fatalf("PackageOf: %q, %v; want %q", got, err, pkg)
	}
	other := s
	other.N = 16
	_, err := kernels.For(other)
	var mis *kernels.MismatchError
	if !errors.As(err, &mis) || mis.Package != pkg || !strings.Contains(err.Error(), pkg) || !strings.Contains(err.Error(), "rename one of the two specs") {
		t.Errorf("For(a differing spec): %v", err)
	}

	d := registryTestSpec("registry_test_dup")
	kernels.Register(d)
	kernels.Register(d)
	_, err = kernels.Lookup(d.Name)
	if err == nil || strings.Count(err.Error(), pkg) != 2 || !strings.Contains(err.Error(), "registered by 2 generated packages") {
		t.Errorf("Lookup of a name registered twice: %v", err)
	}
}
