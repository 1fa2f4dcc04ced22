package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sample() ([]WriteTensor, map[string]string) {
	return []WriteTensor{
		{Name: "b", Shape: []int{3}, Data: []float32{1, -2, 3.5}},
		{Name: "a", Shape: []int{2, 2}, Data: []float32{0.25, 0, -0, 1e-30}},
		{Name: "s", Shape: []int{}, Data: []float32{42}},
	}, map[string]string{"spec": "{}", "step": "7"}
}

func encode(t *testing.T) []byte {
	t.Helper()
	ts, meta := sample()
	var buf bytes.Buffer
	if err := Encode(&buf, ts, meta); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestEncodeParse(t *testing.T) {
	b := encode(t)
	hlen := binary.LittleEndian.Uint64(b)
	if (8+hlen)%8 != 0 {
		t.Errorf("data section starts at %d, not 8-aligned", 8+hlen)
	}
	// The header is plain safetensors JSON.
	var h map[string]any
	if err := json.Unmarshal(b[8:8+hlen], &h); err != nil {
		t.Fatal(err)
	}
	if e := h["a"].(map[string]any); e["dtype"] != "F32" {
		t.Fatalf("header entry %v", e)
	}
	f, err := Parse("mem", b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata["step"] != "7" || f.Metadata["spec"] != "{}" {
		t.Fatalf("metadata %v", f.Metadata)
	}
	ts, _ := sample()
	for _, w := range ts {
		got := f.Tensors[w.Name]
		if got == nil || len(got.Shape) != len(w.Shape) {
			t.Fatalf("tensor %s: %+v", w.Name, got)
		}
		dst := make([]float32, got.Elems())
		if err := got.Float32s(dst); err != nil {
			t.Fatal(err)
		}
		for i := range dst {
			if dst[i] != w.Data[i] {
				t.Fatalf("tensor %s[%d] = %v, want %v", w.Name, i, dst[i], w.Data[i])
			}
		}
	}
	if got := strings.Join(f.Names(), ","); got != "a,b,s" {
		t.Fatalf("names %s", got)
	}
}

// TestTruncated cuts a valid file at every length: each is an error, none panics.
func TestTruncated(t *testing.T) {
	b := encode(t)
	for n := 0; n < len(b); n++ {
		if _, err := Parse("cut", b[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: accepted", n, len(b))
		}
	}
	// Trailing garbage is an error too.
	if _, err := Parse("long", append(append([]byte(nil), b...), 0, 0, 0, 0)); err == nil {
		t.Fatal("trailing bytes accepted")
	}
}

// TestCorrupt flips bytes all over a valid file: errors or valid files, never a panic.
func TestCorrupt(t *testing.T) {
	b := encode(t)
	for i := range b {
		for _, x := range []byte{0xff, '"', '9', '}', 0} {
			c := append([]byte(nil), b...)
			c[i] = x
			Parse("corrupt", c) // must not panic
		}
	}
}

func header(t *testing.T, h string, data int) []byte {
	t.Helper()
	b := make([]byte, 8, 8+len(h)+data)
	binary.LittleEndian.PutUint64(b, uint64(len(h)))
	b = append(b, h...)
	return append(b, make([]byte, data)...)
}

func TestBadHeaders(t *testing.T) {
	for _, c := range []struct {
		name, header string
		data         int
		want         string
	}{
		{"not json", `hello world`, 0, "JSON"},
		{"array", `[1,2]`, 0, "JSON object"},
		{"bad json", `{"a":`, 0, "header JSON"},
		{"unknown dtype", `{"a":{"dtype":"F17","shape":[1],"data_offsets":[0,4]}}`, 4, `"a": unknown dtype`},
		{"missing offsets", `{"a":{"dtype":"F32","shape":[1]}}`, 4, `"a"`},
		{"out of range", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4, "out of range"},
		{"negative", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`, 4, "out of range"},
		{"size mismatch", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 4, "needs 8"},
		{"negative dim", `{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4, "bad dimension"},
		{"overlap", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4, "overlap"},
		{"hole", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8, "hole"},
		{"metadata not strings", `{"__metadata__":{"step":7}}`, 0, "__metadata__"},
		{"huge shape", `{"a":{"dtype":"F32","shape":[2147483647,2147483647,2147483647],"data_offsets":[0,4]}}`, 4, "too large"},
	} {
		_, err := Parse(c.name, header(t, c.header, c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), c.name+":") {
			t.Errorf("%s: err = %v, want one naming the file and containing %q", c.name, err, c.want)
		}
	}
	// Header length past the file end, and absurd.
	b := header(t, `{}`, 0)
	binary.LittleEndian.PutUint64(b, 1000)
	if _, err := Parse("long header", b); err == nil || !strings.Contains(err.Error(), "past the end") {
		t.Errorf("header length past the end: %v", err)
	}
	binary.LittleEndian.PutUint64(b, 1<<62)
	if _, err := Parse("huge header", b); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("huge header length: %v", err)
	}
}

func TestWriteReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.safetensors")
	ts, meta := sample()
	if err := Write(p, ts, meta); err != nil {
		t.Fatal(err)
	}
	ts[0].Data[0] = 99
	if err := Write(p, ts, meta); err != nil { // replaces the file
		t.Fatal(err)
	}
	f, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, 3)
	f.Tensors["b"].Float32s(dst)
	if dst[0] != 99 {
		t.Fatalf("rewrite not seen: %v", dst)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries (temporary files left?)", len(entries))
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}
	// Errors name the file.
	if _, err := Read(filepath.Join(dir, "none.safetensors")); err == nil || !strings.Contains(err.Error(), "none.safetensors") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("directory: %v", err)
	}
	txt := filepath.Join(dir, "notes.txt")
	os.WriteFile(txt, []byte("Just some text, not a safetensors file at all.\n"), 0o644)
	if _, err := Read(txt); err == nil || !strings.Contains(err.Error(), "notes.txt") || !strings.Contains(err.Error(), "not a valid safetensors") {
		t.Errorf("text file: %v", err)
	}
	// A write into a missing directory fails cleanly.
	if err := Write(filepath.Join(dir, "no", "x.safetensors"), ts, meta); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	// Bad tensors are refused before anything is written.
	if err := Write(filepath.Join(dir, "y.safetensors"), []WriteTensor{{Name: "a", Shape: []int{2}, Data: []float32{1}}}, nil); err == nil {
		t.Error("shape/data mismatch accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, "y.safetensors")); err == nil {
		t.Error("failed write left a file")
	}
	entries, _ = os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}
