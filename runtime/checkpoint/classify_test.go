package checkpoint

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/internal/clstest"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
)

func newClassifier(t *testing.T, classes int) *model.Model {
	t.Helper()
	s, err := clstest.Spec("small", classes)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernels.For(s)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(s, k, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestClassifierRoundTrip: the head's tensors and the labels metadata (the
// card's names) are saved and loaded exactly.
func TestClassifierRoundTrip(t *testing.T) {
	m := newClassifier(t, 3)
	m.Labels = []string{"pos", "neg", "ünï"}
	p := filepath.Join(t.TempDir(), "c.safetensors")
	if err := Save(p, m, 9); err != nil {
		t.Fatal(err)
	}
	got, _, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	sameParams(t, m, got)
	if strings.Join(got.Labels, "|") != "pos|neg|ünï" {
		t.Fatalf("labels %q", got.Labels)
	}
	f, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	if err := json.Unmarshal([]byte(f.Metadata[KeyLabels]), &labels); err != nil || len(labels) != 3 {
		t.Fatalf("metadata %q: %v", f.Metadata[KeyLabels], err)
	}
	shapes := map[string][]int{}
	for _, ts := range f.Tensors {
		shapes[ts.Name] = ts.Shape
	}
	if s := shapes["head.weight"]; len(s) != 2 || s[0] != 3 || s[1] != m.Spec.D {
		t.Errorf("head.weight shape %v", s)
	}
	if s := shapes["head.bias"]; len(s) != 1 || s[0] != 3 {
		t.Errorf("head.bias shape %v", s)
	}
	h, err := PeekHeader(p)
	if err != nil || len(h.Labels) != 3 {
		t.Fatalf("PeekHeader: labels %q, %v", h.Labels, err)
	}
}

// TestClassifierLabelErrors: a classifier's checkpoint without labels, or
// with the wrong number, or labels on a language model, are clear errors.
func TestClassifierLabelErrors(t *testing.T) {
	dir := t.TempDir()
	m := newClassifier(t, 3)
	if err := Save(filepath.Join(dir, "x.safetensors"), m, 1); err == nil || !strings.Contains(err.Error(), "0 labels for its 3 classes") {
		t.Errorf("save without labels: %v", err)
	}
	m.Labels = []string{"a", "a", "b"}
	if err := Save(filepath.Join(dir, "x.safetensors"), m, 1); err == nil || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("save with a label twice: %v", err)
	}
	spec := m.Spec.JSON()
	write := func(name string, md map[string]string, mm *model.Model) string {
		p := filepath.Join(dir, name)
		if err := Write(p, tensorsOf(mm), md); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lm := newModel(t, "small", 1)
	for _, c := range []struct {
		path string
		want []string
	}{
		{write("nolabels.safetensors", map[string]string{KeySpec: spec, KeyStep: "1"}, m), []string{"nolabels.safetensors", `"labels"`}},
		{write("two.safetensors", map[string]string{KeySpec: spec, KeyStep: "1", KeyLabels: `["a","b"]`}, m), []string{"two.safetensors", "2 labels for its 3 classes"}},
		{write("notjson.safetensors", map[string]string{KeySpec: spec, KeyStep: "1", KeyLabels: `a,b,c`}, m), []string{"notjson.safetensors", "JSON list"}},
		{write("lm.safetensors", map[string]string{KeySpec: lm.Spec.JSON(), KeyStep: "1", KeyLabels: `["a","b"]`}, lm), []string{"lm.safetensors", "only for a classifier"}},
	} {
		_, _, err := Load(c.path)
		if err == nil {
			t.Errorf("%s: loaded", c.path)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", filepath.Base(c.path), err, w)
			}
		}
	}
}
