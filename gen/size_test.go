package gen

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/gen/asmgen"
	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/specs"
)

// TestShippedSpecsUnderSizeLimit: every shipped spec (specs/*.json and the
// examples' specs) emits well under MaxInstructions, so the limit refuses
// only specs far beyond them.
func TestShippedSpecsUnderSizeLimit(t *testing.T) {
	var all []*specs.Spec
	shipped, err := LoadAll(filepath.Join(root(t), "specs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range shipped {
		all = append(all, l.Spec)
	}
	examples, err := filepath.Glob(filepath.Join(root(t), "examples", "*", "*.json"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no example specs: %v", err)
	}
	for _, p := range examples {
		s, err := specs.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, s)
	}
	largest, name := 0, ""
	for _, s := range all {
		af := asmgen.NewFile(catalog.ConfigOf(s))
		for _, isa := range asmLevels {
			for _, op := range catalog.Ops(s) {
				if !asmgen.Has(op, af.Config) {
					continue
				}
				if err := asmgen.Emit(af, op, isa); err != nil {
					t.Fatalf("%s: %v", s.Name, err)
				}
			}
		}
		if n := emitted(af); n > largest {
			largest, name = n, s.Name
		}
	}
	if largest > MaxInstructions/4 {
		t.Errorf("spec %s emits %d instructions, within 4 times of the limit %d", name, largest, MaxInstructions)
	}
	t.Logf("the largest shipped spec, %s, emits %d instructions (limit %d)", name, largest, MaxInstructions)
}

// TestOversizedSpecRefused: a valid spec whose kernels would be far too
// large (d 8192 with one head: a head width of 8192 to unroll) is refused
// by Render in well under a second, before compiling, with an error
// naming the spec and the limit; a smaller one of the same shape renders.
func TestOversizedSpecRefused(t *testing.T) {
	for _, js := range []string{
		`{"name": "huge", "n": 64, "d": 8192, "heads": 1, "layers": 1, "variant": "random"}`,
		`{"name": "huge", "n": 64, "d": 8192, "heads": 1, "layers": 1, "variant": "vanilla+dense+random+factorized_random+factorized_dense", "k": 4, "a": 8, "b": 8}`,
	} {
		s, err := specs.Parse("huge.json", []byte(js))
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		_, err = Render(s, Options{SpecRel: "huge.json"})
		d := time.Since(t0)
		if err == nil {
			t.Fatalf("%s: rendered", js)
		}
		for _, w := range []string{"spec huge", "limit of 200000 assembly instructions", "d/heads = 8192"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not say %q", err, w)
			}
		}
		// Refused as the bound was passed, before compiling: the count it
		// stopped at is within one kernel of the bound (the largest kernel
		// of these specs is far below MaxInstructions), not the whole
		// package's. The time is only a backstop against compiling (which
		// takes minutes here), generous for a loaded 2-core machine.
		var stopped int
		if i := strings.Index(err.Error(), "instructions ("); i < 0 {
			t.Errorf("error %q does not say where it stopped", err)
		} else if _, e := fmt.Sscanf(err.Error()[i+len("instructions ("):], "%d emitted", &stopped); e != nil {
			t.Errorf("error %q: count: %v", err, e)
		} else if stopped <= MaxInstructions || stopped > 2*MaxInstructions {
			t.Errorf("%s: stopped at %d instructions, want just past the bound %d", js, stopped, MaxInstructions)
		}
		if d > 20*time.Second {
			t.Errorf("%s: refused after %v: was it compiled?", js, d)
		}
		t.Logf("refused in %v: %v", d, err)
	}
	s, err := specs.Parse("wide.json", []byte(`{"name": "wide", "n": 64, "d": 1024, "heads": 1, "layers": 1, "variant": "random"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Render(s, Options{SpecRel: "wide.json"}); err != nil {
		t.Errorf("d 1024 with one head: %v", err)
	}
}
