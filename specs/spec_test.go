package specs

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestShippedSpecsValid(t *testing.T) {
	paths, err := filepath.Glob("*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no shipped specs: %v", err)
	}
	covered := map[string]bool{}
	for _, p := range paths {
		s, err := Load(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if s.Name+".json" != filepath.Base(p) {
			t.Errorf("%s: name %q does not match the file name", p, s.Name)
		}
		for _, c := range s.Components() {
			covered[c] = true
		}
		if s.IsMixture() {
			covered[s.Variant] = true
		}
	}
	// The shipped specs cover every synthesizer-family variant and the
	// mixtures the issue names.
	for _, want := range []string{"vanilla", "dense", "random", "fixed_random", "factorized_random",
		"factorized_dense", "random+vanilla", "dense+vanilla", "random+dense"} {
		if !covered[want] {
			t.Errorf("no shipped spec covers %s", want)
		}
	}
}

func TestDefaults(t *testing.T) {
	s, err := Parse("x.json", []byte(`{"name":"x","n":16,"d":32,"heads":4,"layers":1,"variant":"random"}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Vocab != 256 || s.FFN != 128 || s.DH() != 8 {
		t.Errorf("defaults: vocab %d ffn %d dh %d", s.Vocab, s.FFN, s.DH())
	}
	back, err := Parse("", []byte(s.JSON()))
	if err != nil || *back != *s {
		t.Errorf("canonical JSON does not round-trip: %v %+v", err, back)
	}
}

// TestEncoderFields: causal, task and classes parse, default, and
// round-trip through the canonical JSON; a language model's JSON does not
// change by their existence.
func TestEncoderFields(t *testing.T) {
	const base = `"name":"x","n":16,"d":32,"heads":4,"layers":1,"variant":"random"`
	lm, err := Parse("", []byte(`{`+base+`,"task":"lm","causal":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if !lm.Causal() || lm.IsClassifier() || lm.Task != "" {
		t.Errorf("lm spec: causal %v classifier %v task %q", lm.Causal(), lm.IsClassifier(), lm.Task)
	}
	if want := `{"name":"x","n":16,"d":32,"heads":4,"layers":1,"variant":"random","vocab":256,"ffn":128}`; lm.JSON() != want {
		t.Errorf("lm JSON = %s, want %s", lm.JSON(), want)
	}
	enc, err := Parse("", []byte(`{`+base+`,"task":"classify","classes":10,"causal":false}`))
	if err != nil {
		t.Fatal(err)
	}
	if enc.Causal() || !enc.IsClassifier() || enc.Classes != 10 {
		t.Errorf("encoder spec: causal %v classifier %v classes %d", enc.Causal(), enc.IsClassifier(), enc.Classes)
	}
	if !strings.Contains(enc.JSON(), `"causal":false`) || !strings.Contains(enc.JSON(), `"task":"classify","classes":10`) {
		t.Errorf("encoder JSON = %s", enc.JSON())
	}
	back, err := Parse("", []byte(enc.JSON()))
	if err != nil || *back != *enc {
		t.Errorf("encoder JSON does not round-trip: %v %+v", err, back)
	}
	if err := back.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	var viaJSON struct{ S Spec }
	if err := json.Unmarshal([]byte(`{"S":`+enc.JSON()+`}`), &viaJSON); err != nil || viaJSON.S != *enc {
		t.Errorf("encoding/json does not round-trip the encoder: %v %+v", err, viaJSON.S)
	}
	if err := json.Unmarshal([]byte(`{"S":{"name":"x"}}`), &viaJSON); err == nil {
		t.Error("encoding/json accepted a spec without n")
	}
	causalCls, err := Parse("", []byte(`{`+base+`,"task":"classify","classes":2}`))
	if err != nil || !causalCls.Causal() {
		t.Errorf("a causal classifier: %v %+v", err, causalCls)
	}
}

func TestBadSpecs(t *testing.T) {
	const base = `"name":"x","n":16,"d":32,"heads":4,"layers":1`
	for _, c := range []struct {
		doc, field, rule string
	}{
		{`{` + base + `,"variant":"foo"}`, "variant", "unknown variant"},
		{`{` + base + `,"variant":"random+foo"}`, "variant", "unknown variant"},
		{`{` + base + `,"variant":"random+random"}`, "variant", "twice"},
		{`{` + base + `,"variant":"random+aft_full"}`, "variant", "cannot be mixed"},
		{`{` + base + `,"variant":"random+fixed_random"}`, "variant", "share"},
		{`{"name":"x","n":16,"d":30,"heads":4,"layers":1,"variant":"random"}`, "d", "multiple of heads"},
		{`{` + base + `,"variant":"factorized_dense","a":3,"b":4}`, "b", "a·b = n"},
		{`{` + base + `,"variant":"factorized_dense","a":4}`, "b", "required"},
		{`{` + base + `,"variant":"factorized_random"}`, "k", "required"},
		{`{` + base + `,"variant":"factorized_random","k":17}`, "k", "1 ≤ k ≤ n"},
		{`{` + base + `,"variant":"random","k":4}`, "k", "only allowed"},
		{`{` + base + `,"variant":"aft_local"}`, "window", "required"},
		{`{` + base + `,"variant":"aft_conv","window":0}`, "window", "1 ≤ window ≤ n"},
		{`{` + base + `,"variant":"random","extra":1}`, "extra", "unknown field"},
		{`{"name":"x","n":0,"d":32,"heads":4,"layers":1,"variant":"random"}`, "n", "1 ≤ n ≤ 8192"},
		{`{"name":"x","n":9000,"d":32,"heads":4,"layers":1,"variant":"random"}`, "n", "1 ≤ n ≤ 8192"},
		{`{"name":"x","n":16.5,"d":32,"heads":4,"layers":1,"variant":"random"}`, "n", "integer"},
		{`{"name":"x","n":"16","d":32,"heads":4,"layers":1,"variant":"random"}`, "n", "integer"},
		{`{"name":"X-1","n":16,"d":32,"heads":4,"layers":1,"variant":"random"}`, "name", "[a-z]"},
		{`{"n":16,"d":32,"heads":4,"layers":1,"variant":"random"}`, "name", "missing"},
		{`{"name":"x","n":16,"d":32,"heads":0,"layers":1,"variant":"random"}`, "heads", "≥ 1"},
		{`{"name":"x","n":16,"d":32,"heads":4,"layers":0,"variant":"random"}`, "layers", "≥ 1"},
		{`{` + base + `,"variant":"random","vocab":300}`, "vocab", "vocab ≤ 256"},
		{`{` + base + `,"variant":"random","task":"seq2seq"}`, "task", `"lm" or "classify"`},
		{`{` + base + `,"variant":"random","task":"classify"}`, "classes", "required"},
		{`{` + base + `,"variant":"random","task":"classify","classes":1}`, "classes", "2 ≤ classes ≤ 4096"},
		{`{` + base + `,"variant":"random","task":"classify","classes":5000}`, "classes", "2 ≤ classes ≤ 4096"},
		{`{` + base + `,"variant":"random","classes":3}`, "classes", "only allowed"},
		{`{` + base + `,"variant":"random","causal":false}`, "causal", "needs task"},
		{`{` + base + `,"variant":"random","task":"lm","causal":false}`, "causal", "needs task"},
		{`{` + base + `,"variant":"random","causal":"no"}`, "causal", "true or false"},
		{`{` + base + `,"variant":"random","causal":null}`, "causal", "true or false"},
		{`{` + base + `,"variant":"random"`, "", "malformed JSON"},
		{`[1,2]`, "", "malformed JSON"},
		{`{` + base + `,"variant":"random"} {}`, "", "malformed JSON"},
	} {
		_, err := Parse("bad.json", []byte(c.doc))
		var se *Error
		if !errors.As(err, &se) {
			t.Errorf("%s: want a spec error, got %v", c.doc, err)
			continue
		}
		if se.Field != c.field || !strings.Contains(se.Rule, c.rule) || se.File != "bad.json" {
			t.Errorf("%s: got field %q rule %q, want field %q rule containing %q", c.doc, se.Field, se.Rule, c.field, c.rule)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "bad.json: ") || (c.field != "" && !strings.Contains(msg, `"`+c.field+`"`)) {
			t.Errorf("message %q does not name the file and field", msg)
		}
	}
}

// TestLoadNotRegular: a directory or a device is an error, not an endless read.
func TestLoadNotRegular(t *testing.T) {
	for _, p := range []string{t.TempDir(), "/dev/zero"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("Load(%s): %v", p, err)
		}
	}
}
