package study

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/synthgen/synthgen/runtime/synth"
	"github.com/synthgen/synthgen/specs"
)

// DefaultRef is the spec whose size makes the default family: the
// linked specs of n 128, d 128, 4 heads, 4 layers.
const DefaultRef = "random"

// DefaultClassifyRef is the spec whose size makes the default family of a
// classification study: the bidirectional classifiers enc_* (n 128, d 64,
// 4 heads, 2 layers, 10 classes).
const DefaultClassifyRef = "enc_random"

// variantRank orders a family as the Synthesizer paper's tables do:
// vanilla, the synthetic variants, the mixtures, then the attention-free
// and linear baselines.
var variantRank = map[string]int{
	"vanilla": 0, "random": 1, "fixed_random": 2, "factorized_random": 3, "dense": 4, "factorized_dense": 5,
	"aft_full": 20, "aft_local": 21, "aft_simple": 22, "aft_conv": 23, "linear": 24,
}

func rank(s specs.Spec) int {
	if s.IsMixture() {
		return 10
	}
	if r, ok := variantRank[s.Variant]; ok {
		return r
	}
	return 30
}

// Family returns every linked spec of ref's size (n, d, heads, layers,
// ffn and vocabulary) and kind (task, classes and causality), one per
// variant family member, in the order
// vanilla, synthetic variants, mixtures, AFT, linear (then by name).
func Family(ref specs.Spec) ([]specs.Spec, error) {
	var out []specs.Spec
	for _, name := range synth.Linked() {
		s, err := synth.LookupSpec(name)
		if err != nil {
			return nil, err
		}
		if s.N == ref.N && s.D == ref.D && s.Heads == ref.Heads && s.Layers == ref.Layers && s.FFN == ref.FFN && s.Vocab == ref.Vocab &&
			s.Task == ref.Task && s.Classes == ref.Classes && s.Bidirectional == ref.Bidirectional {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		ri, rj := rank(out[i]), rank(out[j])
		if ri != rj {
			return ri < rj
		}
		return out[i].Name < out[j].Name
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("no linked spec has the size of spec %s", ref.Name)
	}
	return out, nil
}

// DefaultFamily is Family of the linked spec DefaultRef: the n128 d128
// h4 L4 specs (14 shipped variants).
func DefaultFamily() ([]specs.Spec, error) {
	ref, err := synth.LookupSpec(DefaultRef)
	if err != nil {
		return nil, fmt.Errorf("default family: %w", err)
	}
	return Family(ref)
}

// DefaultClassifyFamily is Family of the linked spec DefaultClassifyRef:
// the bidirectional classifiers of every shipped variant (12 specs).
func DefaultClassifyFamily() ([]specs.Spec, error) {
	ref, err := synth.LookupSpec(DefaultClassifyRef)
	if err != nil {
		return nil, fmt.Errorf("default classifier family: %w", err)
	}
	return Family(ref)
}

// ResolveSpecs resolves a list of specs, each the name of a linked spec
// ("random"), a spec file ("specs/random.json") or a glob of spec files
// ("specs/aft_*.json"), in order; a file's spec must be the one its linked
// package was generated from. A glob matching nothing, an unknown or
// unlinked spec and a spec given twice are errors naming the item.
func ResolveSpecs(items []string) ([]specs.Spec, error) {
	var out []specs.Spec
	seen := map[string]string{}
	add := func(item, nameOrFile string) error {
		s, err := synth.LookupSpec(nameOrFile)
		if err != nil {
			return fmt.Errorf("spec %s: %w", nameOrFile, err)
		}
		if prev, dup := seen[s.Name]; dup {
			return fmt.Errorf("spec %s is given twice (%s and %s)", s.Name, prev, item)
		}
		seen[s.Name] = item
		out = append(out, s)
		return nil
	}
	for _, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.ContainsAny(item, "*?[") {
			files, err := filepath.Glob(item)
			if err != nil {
				return nil, fmt.Errorf("spec pattern %q: %w", item, err)
			}
			if len(files) == 0 {
				return nil, fmt.Errorf("spec pattern %q matches no file", item)
			}
			for _, f := range files {
				if err := add(item, f); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := add(item, item); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no spec given")
	}
	return out, nil
}
