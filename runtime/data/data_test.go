package data

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	b := bytes.Repeat([]byte("abcdefghij"), 100) // 1000 bytes
	d, err := Split("x", b, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Train) != 900 || len(d.Val) != 100 {
		t.Fatalf("split %d/%d, want 900/100", len(d.Train), len(d.Val))
	}
	if !bytes.Equal(d.Val, b[900:]) || !bytes.Equal(d.Train, b[:900]) {
		t.Fatal("split is not the first 90% / last 10%")
	}
	// 100 held-out bytes hold a window of n+1 ≤ 100 bytes only.
	if _, err := Split("x", b, 99); err != nil {
		t.Fatalf("n = 99: %v", err)
	}
	if _, err := Split("x", b, 100); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Fatalf("n = 100: err = %v, want too short", err)
	}
	if _, err := Split("x", b[:10], 10); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Fatalf("10 bytes, n = 10: err = %v, want too short", err)
	}
	for _, n := range []int{1, 7, 64, 128} {
		l := MinLen(n)
		if _, err := Split("x", make([]byte, l), n); err != nil {
			t.Errorf("n %d: MinLen %d rejected: %v", n, l, err)
		}
		if _, err := Split("x", make([]byte, l-1), n); err == nil {
			t.Errorf("n %d: MinLen−1 = %d accepted", n, l-1)
		}
	}
}

func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadFile(filepath.Join(dir, "missing.txt")); err == nil || !strings.Contains(err.Error(), "missing.txt") || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ReadFile(dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("directory: %v", err)
	}
	p := filepath.Join(dir, "short.txt")
	os.WriteFile(p, []byte("hello"), 0o644)
	if _, err := Load(p, 64, 256); err == nil || !strings.Contains(err.Error(), "short.txt") || !strings.Contains(err.Error(), "too short") {
		t.Errorf("short file: %v", err)
	}
	if os.Getuid() != 0 {
		q := filepath.Join(dir, "secret.txt")
		os.WriteFile(q, make([]byte, 5000), 0o000)
		if _, err := ReadFile(q); err == nil {
			t.Errorf("unreadable file accepted")
		}
	}
}

func TestCheckVocab(t *testing.T) {
	if err := CheckVocab("x", []byte{0, 1, 255}, 256); err != nil {
		t.Error(err)
	}
	if err := CheckVocab("x", []byte{0, 1, 200}, 128); err == nil || !strings.Contains(err.Error(), "offset 2") {
		t.Errorf("byte 200 with vocab 128: %v", err)
	}
}

func TestDefaultFile(t *testing.T) {
	p, err := DefaultFile()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(p) != "Isaac.Newton-Opticks.txt" {
		t.Fatalf("default file %s", p)
	}
	if _, err := Load(p, 128, 256); err != nil {
		t.Fatal(err)
	}
}

func TestSampler(t *testing.T) {
	text := make([]byte, 1000)
	for i := range text {
		text[i] = byte(i * 7)
	}
	const n, batch = 16, 4
	a, err := NewSampler(text, n, batch, 42)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSampler(text, n, batch, 42)
	c, _ := NewSampler(text, n, batch, 43)
	a.Batch(5)
	in5 := append([]int32(nil), a.Inputs...)
	a.Batch(6)
	in6 := append([]int32(nil), a.Inputs...)
	b.Batch(6) // order of calls does not matter: the batch is a function of (seed, step)
	b.Batch(5)
	if !equal32(in5, b.Inputs) {
		t.Fatal("same (seed, step) gave different batches")
	}
	if equal32(in5, in6) {
		t.Fatal("steps 5 and 6 gave the same batch")
	}
	c.Batch(5)
	if equal32(in5, c.Inputs) {
		t.Fatal("seeds 42 and 43 gave the same batch")
	}
	// Windows are n+1 consecutive bytes: inputs the first n, targets the last n.
	a.Batch(9)
	for s, off := range a.Offsets {
		if off < 0 || off+n+1 > len(text) {
			t.Fatalf("offset %d out of range", off)
		}
		for i := 0; i < n; i++ {
			if a.Inputs[s*n+i] != int32(text[off+i]) || a.Targets[s*n+i] != int32(text[off+i+1]) {
				t.Fatalf("sequence %d position %d: wrong window", s, i)
			}
		}
	}
	// Offsets cover the whole range, including the last window.
	small, _ := NewSampler(text[:n+3], n, 1, 1) // offsets 0, 1, 2
	seen := map[int]bool{}
	for step := 0; step < 200; step++ {
		small.Batch(step)
		seen[small.Offsets[0]] = true
	}
	if len(seen) != 3 {
		t.Fatalf("offsets seen %v, want 0, 1, 2", seen)
	}
	if allocs := testing.AllocsPerRun(50, func() { a.Batch(7) }); allocs != 0 {
		t.Fatalf("Batch allocates %v times", allocs)
	}
	if _, err := NewSampler(text[:n], n, 1, 1); err == nil {
		t.Fatal("text shorter than a window accepted")
	}
}

func TestWindows(t *testing.T) {
	text := []byte("0123456789abcdefghij") // 20 bytes
	const n = 5                            // windows of 6 bytes: 3 whole ones, 2 bytes dropped
	if k := NumWindows(text, n, 0); k != 3 {
		t.Fatalf("NumWindows = %d, want 3", k)
	}
	if k := NumWindows(text, n, 2); k != 2 {
		t.Fatalf("NumWindows limit 2 = %d", k)
	}
	in := make([]int32, n)
	tg := make([]int32, n)
	Window(text, n, 2, in, tg)
	if string(bytesOf(in)) != "cdefg" || string(bytesOf(tg)) != "defgh" {
		t.Fatalf("window 2: %q → %q", bytesOf(in), bytesOf(tg))
	}
}

func bytesOf(x []int32) []byte {
	b := make([]byte, len(x))
	for i, v := range x {
		b[i] = byte(v)
	}
	return b
}

func equal32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestNotExist: a missing data file's error names it and wraps
// fs.ErrNotExist.
func TestNotExist(t *testing.T) {
	p := filepath.Join(t.TempDir(), "none.txt")
	for name, f := range map[string]func() error{
		"ReadFile": func() error { _, err := ReadFile(p); return err },
		"Load":     func() error { _, err := Load(p, 8, 256); return err },
	} {
		if err := f(); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "data file "+p+": no such file") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
