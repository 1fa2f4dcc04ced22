// Package specs parses and validates synthgen model specs: the JSON files
// in this directory, whose meaning is fixed by the model card
// (docs/model.md). Both the generator (gen/) and the runtime read
// specs through this package, so the rules live in one place.
package specs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/synthgen/synthgen/internal/jsonkeys"
)

// Spec is one validated model configuration.
type Spec struct {
	Name    string `json:"name"`
	N       int    `json:"n"`
	D       int    `json:"d"`
	Heads   int    `json:"heads"`
	Layers  int    `json:"layers"`
	Variant string `json:"variant"`
	Vocab   int    `json:"vocab"`
	FFN     int    `json:"ffn"`
	K       int    `json:"k,omitempty"`
	A       int    `json:"a,omitempty"`
	B       int    `json:"b,omitempty"`
	Window  int    `json:"window,omitempty"`
	// Task is "classify" for a classifier; "" (written "lm" or left out
	// in a spec file) for the default next-byte language model.
	Task string `json:"task,omitempty"`
	// Classes is a classifier's number of labels K.
	Classes int `json:"classes,omitempty"`
	// Bidirectional is the card's "causal": false: every position sees
	// every key of its sequence. The JSON field is "causal", written only
	// when false (MarshalJSON).
	Bidirectional bool `json:"-"`
}

// The tasks of the card's "task" field.
const (
	TaskLM       = "lm"
	TaskClassify = "classify"
)

// Causal reports whether position i sees only keys j ≤ i (the card's
// "causal", default true).
func (s *Spec) Causal() bool { return !s.Bidirectional }

// IsClassifier reports whether the spec's task is classify.
func (s *Spec) IsClassifier() bool { return s.Task == TaskClassify }

// UnmarshalJSON reads a spec's JSON with Parse: every rule is checked,
// defaults are filled in, and "causal" (which the struct's tags do not
// carry) is read.
func (s *Spec) UnmarshalJSON(b []byte) error {
	p, err := Parse("", b)
	if err != nil {
		return err
	}
	*s = *p
	return nil
}

// MarshalJSON writes the spec's fields in the card's order, with "causal"
// only when it is false (the default true is left out, so a language
// model's JSON is what it was before the field existed).
func (s Spec) MarshalJSON() ([]byte, error) {
	type plain Spec
	var causal *bool
	if s.Bidirectional {
		f := false
		causal = &f
	}
	return json.Marshal(struct {
		plain
		Causal *bool `json:"causal,omitempty"`
	}{plain(s), causal})
}

// DH is the head width d/heads.
func (s *Spec) DH() int { return s.D / s.Heads }

// Components returns the variant's parts: one name, or the names joined by
// "+" in a mixture, in the order the spec gives them.
func (s *Spec) Components() []string { return strings.Split(s.Variant, "+") }

// Has reports whether the variant (or one of a mixture's components) is c.
func (s *Spec) Has(c string) bool {
	for _, x := range s.Components() {
		if x == c {
			return true
		}
	}
	return false
}

// IsMixture reports whether the variant mixes two or more logit sources.
func (s *Spec) IsMixture() bool { return len(s.Components()) > 1 }

// IsSynthesizer reports whether the variant builds a [t, t] logit matrix per
// head that goes through softmax and the value product (the synthesizer
// family and vanilla, and their mixtures).
func (s *Spec) IsSynthesizer() bool { return synthesizerFamily[s.Components()[0]] }

// JSON returns the spec's canonical JSON, with defaults filled in. It is
// what checkpoints store in their "spec" metadata.
func (s *Spec) JSON() string {
	b, err := json.Marshal(s)
	if err != nil { // a struct of ints and strings always marshals
		panic(err)
	}
	return string(b)
}

// synthesizerFamily lists the variants that may be mixed with "+".
var synthesizerFamily = map[string]bool{
	"vanilla": true, "dense": true, "random": true, "fixed_random": true,
	"factorized_random": true, "factorized_dense": true,
}

// IsSynthesizerFamily reports whether variant is one of the synthesizer
// family or vanilla, the variants that may be mixed with "+".
func IsSynthesizerFamily(variant string) bool { return synthesizerFamily[variant] }

// attentionFree lists the attention-free and linear variants, which stand alone.
var attentionFree = map[string]bool{
	"aft_full": true, "aft_local": true, "aft_simple": true, "aft_conv": true, "linear": true,
}

// IsAttentionFree reports whether variant is one of the attention-free and
// linear variants, which stand alone.
func IsAttentionFree(variant string) bool { return attentionFree[variant] }

// MaxN is the largest context length a spec may ask for.
const MaxN = 8192

// Upper bounds of the sizes that the model card leaves open: the
// generator unrolls code and the runtime allocates memory by these, so a
// typo (d 65536, layers 1000000000) is an error rather than an
// exhausted machine. They are well above every shipped spec.
const (
	MaxD      = 8192  // model width
	MaxLayers = 256   // blocks
	MaxFFN    = 32768 // feed-forward hidden width: the default 4·d of d ≤ MaxD
)

// Error is a broken spec rule: which file, which field, what value, what rule.
type Error struct {
	File  string // the spec's path, or "" when parsed from memory
	Field string // the JSON field, or "" for the document as a whole
	Value string // the offending value as written, or "" when missing
	Rule  string // the rule that was broken
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q", e.Field)
		if e.Value != "" {
			fmt.Fprintf(&b, " = %s", e.Value)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Rule)
	return b.String()
}

// MaxFileSize bounds a spec file: a spec is a few hundred bytes of JSON.
const MaxFileSize = 1 << 20

// Load reads and validates the spec at path, a regular file of at most
// MaxFileSize bytes.
func Load(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read spec %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("read spec %s: %d bytes is over the %d-byte limit of a spec file", path, fi.Size(), MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read spec %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("read spec %s: over the %d-byte limit of a spec file", path, MaxFileSize)
	}
	return Parse(path, data)
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

var knownFields = []string{"name", "n", "d", "heads", "layers", "variant", "vocab", "ffn", "k", "a", "b", "window", "causal", "task", "classes"}

// Parse validates a spec document; file names it in errors.
func Parse(file string, data []byte) (*Spec, error) {
	fail := func(field, value, rule string) (*Spec, error) {
		return nil, &Error{File: file, Field: field, Value: value, Rule: rule}
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return fail("", "", "malformed JSON: "+err.Error())
	}
	if raw == nil {
		return fail("", "", "malformed JSON: the spec must be a JSON object")
	}
	if dec.More() {
		return fail("", "", "malformed JSON: text after the spec object")
	}
	if err := jsonkeys.Check(data); err != nil {
		var d *jsonkeys.DuplicateError
		if errors.As(err, &d) {
			return fail(d.Key, "", "is given twice: give each field once")
		}
		return fail("", "", "malformed JSON: "+err.Error())
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	known := map[string]bool{}
	for _, k := range knownFields {
		known[k] = true
	}
	for _, k := range keys {
		if !known[k] {
			return fail(k, string(raw[k]), "unknown field (known: "+strings.Join(knownFields, ", ")+")")
		}
	}
	s := &Spec{}
	str := func(field string, dst *string, required bool) error {
		v, ok := raw[field]
		if !ok {
			if required {
				return &Error{File: file, Field: field, Rule: "required field is missing"}
			}
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return &Error{File: file, Field: field, Value: string(v), Rule: "must be a string"}
		}
		return nil
	}
	num := func(field string, dst *int, required bool) error {
		v, ok := raw[field]
		if !ok {
			if required {
				return &Error{File: file, Field: field, Rule: "required field is missing"}
			}
			return nil
		}
		var f float64
		if err := json.Unmarshal(v, &f); err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<30 {
			return &Error{File: file, Field: field, Value: string(v), Rule: "must be an integer"}
		}
		*dst = int(f)
		return nil
	}
	boolean := func(field string, dst *bool) error {
		v, ok := raw[field]
		if !ok {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil || string(bytes.TrimSpace(v)) == "null" {
			return &Error{File: file, Field: field, Value: string(v), Rule: "must be true or false"}
		}
		return nil
	}
	causal := true
	for _, step := range []error{
		str("name", &s.Name, true),
		num("n", &s.N, true),
		num("d", &s.D, true),
		num("heads", &s.Heads, true),
		num("layers", &s.Layers, true),
		str("variant", &s.Variant, true),
		num("vocab", &s.Vocab, false),
		num("ffn", &s.FFN, false),
		num("k", &s.K, false),
		num("a", &s.A, false),
		num("b", &s.B, false),
		num("window", &s.Window, false),
		str("task", &s.Task, false),
		num("classes", &s.Classes, false),
		boolean("causal", &causal),
	} {
		if step != nil {
			return nil, step
		}
	}
	_, hasVocab := raw["vocab"]
	_, hasFFN := raw["ffn"]
	if !hasVocab {
		s.Vocab = 256
	}
	if !hasFFN {
		s.FFN = 4 * s.D
	}
	s.Bidirectional = !causal
	if s.Task == TaskLM {
		s.Task = "" // the default, left out of the canonical JSON
	}
	present := map[string]bool{}
	for k := range raw {
		present[k] = true
	}
	if err := s.validate(file, present); err != nil {
		return nil, err
	}
	return s, nil
}

// Validate checks every rule of the card on an already-built spec (for
// example one read back from a checkpoint's metadata).
func (s *Spec) Validate() error {
	present := map[string]bool{"k": s.K != 0, "a": s.A != 0, "b": s.B != 0, "window": s.Window != 0, "classes": s.Classes != 0}
	return s.validate("", present)
}

func (s *Spec) validate(file string, present map[string]bool) error {
	fail := func(field string, value any, rule string) error {
		return &Error{File: file, Field: field, Value: fmt.Sprint(value), Rule: rule}
	}
	q := func(v string) string { return fmt.Sprintf("%q", v) }
	if !nameRE.MatchString(s.Name) {
		return fail("name", q(s.Name), "must match [a-z][a-z0-9_]* (it is a Go package name)")
	}
	if s.N < 1 || s.N > MaxN {
		return fail("n", s.N, fmt.Sprintf("must satisfy 1 ≤ n ≤ %d", MaxN))
	}
	if s.Heads < 1 {
		return fail("heads", s.Heads, "must be ≥ 1")
	}
	if s.D < 1 {
		return fail("d", s.D, "must be ≥ 1")
	}
	if s.D > MaxD {
		return fail("d", s.D, fmt.Sprintf("must be ≤ %d (synthgen's limit)", MaxD))
	}
	if s.D%s.Heads != 0 {
		return fail("d", s.D, fmt.Sprintf("must be a multiple of heads (%d)", s.Heads))
	}
	if s.Layers < 1 {
		return fail("layers", s.Layers, "must be ≥ 1")
	}
	if s.Layers > MaxLayers {
		return fail("layers", s.Layers, fmt.Sprintf("must be ≤ %d (synthgen's limit)", MaxLayers))
	}
	if s.Vocab < 1 || s.Vocab > 256 {
		return fail("vocab", s.Vocab, "must satisfy 1 ≤ vocab ≤ 256 (the model reads bytes)")
	}
	if s.FFN < 1 {
		return fail("ffn", s.FFN, "must be ≥ 1")
	}
	if s.FFN > MaxFFN {
		return fail("ffn", s.FFN, fmt.Sprintf("must be ≤ %d (synthgen's limit)", MaxFFN))
	}
	comps := s.Components()
	seen := map[string]bool{}
	for _, c := range comps {
		switch {
		case synthesizerFamily[c]:
		case attentionFree[c]:
			if len(comps) > 1 {
				return fail("variant", q(s.Variant), c+" cannot be mixed: only the synthesizer family and vanilla join with +")
			}
		default:
			return fail("variant", q(s.Variant), "unknown variant "+q(c)+"; must be one of "+variantList()+", or synthesizer-family names joined by +")
		}
		if seen[c] {
			return fail("variant", q(s.Variant), "names "+c+" twice")
		}
		seen[c] = true
	}
	if seen["random"] && seen["fixed_random"] {
		return fail("variant", q(s.Variant), "random and fixed_random share the parameter R and cannot be mixed")
	}
	need := func(field string, val int, when bool, lo, hi int, rule string) error {
		if !when {
			if present[field] {
				return fail(field, val, "only allowed with a variant that uses it")
			}
			return nil
		}
		if !present[field] {
			return &Error{File: file, Field: field, Rule: "required for variant " + q(s.Variant)}
		}
		if val < lo || val > hi {
			return fail(field, val, rule)
		}
		return nil
	}
	if err := need("k", s.K, seen["factorized_random"], 1, s.N, "must satisfy 1 ≤ k ≤ n"); err != nil {
		return err
	}
	if err := need("a", s.A, seen["factorized_dense"], 1, s.N, "must satisfy a ≥ 1 and a·b = n"); err != nil {
		return err
	}
	if err := need("b", s.B, seen["factorized_dense"], 1, s.N, "must satisfy b ≥ 1 and a·b = n"); err != nil {
		return err
	}
	if seen["factorized_dense"] && s.A*s.B != s.N {
		return fail("b", s.B, fmt.Sprintf("must satisfy a·b = n (a = %d, n = %d)", s.A, s.N))
	}
	if err := need("window", s.Window, seen["aft_local"] || seen["aft_conv"], 1, s.N, "must satisfy 1 ≤ window ≤ n"); err != nil {
		return err
	}
	switch s.Task {
	case "", TaskClassify:
	default:
		return fail("task", q(s.Task), `must be "lm" or "classify"`)
	}
	if s.IsClassifier() {
		if !present["classes"] {
			return &Error{File: file, Field: "classes", Rule: `required for task "classify"`}
		}
		if s.Classes < 2 || s.Classes > MaxClasses {
			return fail("classes", s.Classes, fmt.Sprintf("must satisfy 2 ≤ classes ≤ %d", MaxClasses))
		}
	} else if present["classes"] {
		return fail("classes", s.Classes, `only allowed with task "classify"`)
	}
	if s.Bidirectional && !s.IsClassifier() {
		return fail("causal", false, `false needs task "classify" (a language model predicts the next byte, so it must not see it)`)
	}
	return nil
}

// MaxClasses is the largest number of labels a classifier may have.
const MaxClasses = 4096

func variantList() string {
	var names []string
	for k := range synthesizerFamily {
		names = append(names, k)
	}
	for k := range attentionFree {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
