package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/synthgen/synthgen/generated/fixed_random"
	_ "github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/optim"
)

func newModel(t testing.TB, name string, seed uint64) *model.Model {
	t.Helper()
	k, err := kernels.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(k.Spec, k, seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameParams(t *testing.T, a, b *model.Model) {
	t.Helper()
	if len(a.Params) != len(b.Params) {
		t.Fatalf("%d params vs %d", len(a.Params), len(b.Params))
	}
	for i, p := range a.Params {
		q := b.Params[i]
		if p.Name != q.Name || len(p.Data) != len(q.Data) {
			t.Fatalf("param %d: %s vs %s", i, p.Name, q.Name)
		}
		for j := range p.Data {
			if math.Float32bits(p.Data[j]) != math.Float32bits(q.Data[j]) {
				t.Fatalf("%s[%d]: %v vs %v", p.Name, j, p.Data[j], q.Data[j])
			}
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, name := range []string{"small", "fixed_random"} {
		m := newModel(t, name, 5)
		p := filepath.Join(t.TempDir(), name+".safetensors")
		if err := Save(p, m, 123); err != nil {
			t.Fatal(err)
		}
		got, step, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if step != 123 {
			t.Errorf("step %d", step)
		}
		if got.Spec.JSON() != m.Spec.JSON() {
			t.Errorf("spec %s, want %s", got.Spec.JSON(), m.Spec.JSON())
		}
		sameParams(t, m, got)
		// The model from seed 0 differs from the saved one: Load really read the data.
		if fresh := newModel(t, name, 0); fresh.Params[0].Data[0] == got.Params[0].Data[0] {
			t.Error("loaded tok_emb equals a fresh model's")
		}
		// Tensor names and shapes are the card's: exactly the model's.
		f, err := Read(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Tensors) != len(m.Params) {
			t.Errorf("%d tensors, model has %d params", len(f.Tensors), len(m.Params))
		}
		if f.Metadata[KeySpec] != m.Spec.JSON() || f.Metadata[KeyStep] != "123" {
			t.Errorf("metadata %v", f.Metadata)
		}
	}
}

func TestOptRoundTrip(t *testing.T) {
	m := newModel(t, "fixed_random", 1)
	o := optim.NewAdamW(m.Params, optim.DefaultConfig())
	frozen := 0
	for i, p := range m.Params {
		if p.Frozen {
			frozen++
			continue
		}
		for j := range o.M[i] {
			o.M[i][j] = float32(i) + float32(j)*1e-3
			o.V[i][j] = float32(j) * 1e-4
		}
	}
	if frozen == 0 {
		t.Fatal("fixed_random has no frozen parameter")
	}
	o.Steps = 17
	p := filepath.Join(t.TempDir(), "f.opt.safetensors")
	if err := SaveOpt(p, m, o, 40, map[string]string{"x": "y"}); err != nil {
		t.Fatal(err)
	}
	o2 := optim.NewAdamW(m.Params, optim.DefaultConfig())
	meta, err := LoadOpt(p, m, o2, 40)
	if err != nil {
		t.Fatal(err)
	}
	if meta["x"] != "y" || o2.Steps != 17 {
		t.Errorf("metadata %v, steps %d", meta, o2.Steps)
	}
	for i := range o.M {
		if !bytes.Equal(f32bytes(o.M[i]), f32bytes(o2.M[i])) || !bytes.Equal(f32bytes(o.V[i]), f32bytes(o2.V[i])) {
			t.Fatalf("moments of %s differ", m.Params[i].Name)
		}
	}
	if _, err := LoadOpt(p, m, o2, 41); err == nil || !strings.Contains(err.Error(), "step 40") {
		t.Errorf("stale optimizer state: %v", err)
	}
	if OptPath("dir/x.safetensors") != "dir/x.opt.safetensors" || OptPath("x.bin") != "x.bin.opt.safetensors" {
		t.Error("OptPath")
	}
}

func f32bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// tensorsOf is the model's parameters as WriteTensors.
func tensorsOf(m *model.Model) []WriteTensor {
	ts := make([]WriteTensor, len(m.Params))
	for i, p := range m.Params {
		ts[i] = WriteTensor{Name: p.Name, Shape: append([]int(nil), p.Shape...), Data: p.Data}
	}
	return ts
}

// patchHeader rewrites the JSON header of a safetensors file.
func patchHeader(t *testing.T, b []byte, edit func(map[string]any)) []byte {
	t.Helper()
	hlen := binary.LittleEndian.Uint64(b)
	var h map[string]any
	if err := json.Unmarshal(b[8:8+hlen], &h); err != nil {
		t.Fatal(err)
	}
	edit(h)
	nh, _ := json.Marshal(h)
	out := make([]byte, 8, 8+len(nh)+len(b))
	binary.LittleEndian.PutUint64(out, uint64(len(nh)))
	out = append(out, nh...)
	return append(out, b[8+hlen:]...)
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	m := newModel(t, "small", 1)
	good := filepath.Join(dir, "good.safetensors")
	if err := Save(good, m, 3); err != nil {
		t.Fatal(err)
	}
	goodBytes, _ := os.ReadFile(good)
	meta := func(spec, step string) map[string]string { return map[string]string{KeySpec: spec, KeyStep: step} }
	spec := m.Spec.JSON()
	write := func(name string, ts []WriteTensor, md map[string]string) string {
		p := filepath.Join(dir, name)
		if err := Write(p, ts, md); err != nil {
			t.Fatal(err)
		}
		return p
	}
	drop := func(name string) []WriteTensor {
		var out []WriteTensor
		for _, w := range tensorsOf(m) {
			if w.Name != name {
				out = append(out, w)
			}
		}
		return out
	}
	reshaped := tensorsOf(m)
	reshaped[0].Shape = []int{reshaped[0].Shape[1], reshaped[0].Shape[0]} // tok_emb transposed: same size
	extra := append(tensorsOf(m), WriteTensor{Name: "layers.9.attn.R", Shape: []int{1}, Data: []float32{0}})
	dtype := filepath.Join(dir, "dtype.safetensors")
	os.WriteFile(dtype, patchHeader(t, goodBytes, func(h map[string]any) {
		h["lnf.weight"].(map[string]any)["dtype"] = "I32"
	}), 0o644)
	odd := strings.Replace(spec, `"n":64`, `"n":32`, 1)
	txt := filepath.Join(dir, "text.safetensors")
	os.WriteFile(txt, []byte("This is a plain text file pretending to be a checkpoint.\n"), 0o644)

	for _, c := range []struct {
		path string
		want []string
	}{
		{filepath.Join(dir, "missing.safetensors"), []string{"missing.safetensors", "no such file"}},
		{dir, []string{"directory"}},
		{txt, []string{"text.safetensors", "not a valid safetensors"}},
		{write("nolnf.safetensors", drop("lnf.bias"), meta(spec, "3")), []string{"nolnf.safetensors", `"lnf.bias"`, "missing"}},
		{write("shape.safetensors", reshaped, meta(spec, "3")), []string{"shape.safetensors", `"tok_emb"`, "shape"}},
		{dtype, []string{"dtype.safetensors", `"lnf.weight"`, "I32"}},
		{write("extra.safetensors", extra, meta(spec, "3")), []string{"extra.safetensors", `"layers.9.attn.R"`, "unexpected"}},
		{write("nospec.safetensors", tensorsOf(m), map[string]string{KeyStep: "3"}), []string{"nospec.safetensors", `"spec"`}},
		{write("badstep.safetensors", tensorsOf(m), meta(spec, "three")), []string{"badstep.safetensors", "step"}},
		{write("unlinked.safetensors", tensorsOf(m), meta(strings.Replace(spec, `"small"`, `"nosuchspec"`, 1), "3")), []string{"unlinked.safetensors", `"nosuchspec"`, "not linked"}},
		{write("invalid.safetensors", tensorsOf(m), meta(strings.Replace(spec, `"heads":2`, `"heads":3`, 1), "3")), []string{"invalid.safetensors", `"d"`, "multiple of heads"}},
		{write("otherspec.safetensors", tensorsOf(m), meta(odd, "3")), []string{"otherspec.safetensors", "differs from the linked"}},
		{write("badjson.safetensors", tensorsOf(m), meta("{", "3")), []string{"badjson.safetensors", "malformed JSON"}},
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

// TestLoadTruncated cuts a checkpoint at every byte of its header and
// every few bytes of its data: always an error naming the file, never a
// panic (in memory at every cut, through Load from disk at a coarser one).
func TestLoadTruncated(t *testing.T) {
	dir := t.TempDir()
	m := newModel(t, "small", 1)
	good := filepath.Join(dir, "good.safetensors")
	if err := Save(good, m, 3); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(good)
	hlen := int(binary.LittleEndian.Uint64(b))
	for n := 0; n < len(b); n += stride(n, hlen, 1, 97) {
		if _, err := Parse("cut.safetensors", b[:n]); err == nil || !strings.Contains(err.Error(), "cut.safetensors") {
			t.Fatalf("cut at %d of %d bytes: %v", n, len(b), err)
		}
	}
	p := filepath.Join(dir, "cut.safetensors")
	for n := 0; n < len(b); n += stride(n, hlen, 13, 4999) {
		os.WriteFile(p, b[:n], 0o644)
		_, _, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), "cut.safetensors") {
			t.Fatalf("cut at %d of %d bytes: %v", n, len(b), err)
		}
	}
}

// stride steps through the header by inHeader and the data by inData.
func stride(n, hlen, inHeader, inData int) int {
	if n < 8+hlen+8 {
		return inHeader
	}
	return inData
}
