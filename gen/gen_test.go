package gen

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

func root(t testing.TB) string {
	t.Helper()
	r, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func renderShipped(t *testing.T, l Loaded) *Package {
	t.Helper()
	dir := filepath.Join(root(t), "generated", l.Spec.Name)
	specAbs, _ := filepath.Abs(l.Path)
	specRel, _ := filepath.Rel(dir, specAbs)
	info, err := scanDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Render(l.Spec, Options{SpecRel: specRel, GoGenerate: info.generate == ""})
	if err != nil {
		t.Fatalf("%s: %v", l.Spec.Name, err)
	}
	return p
}

// TestGeneratedUpToDate renders every shipped spec twice and compares both
// renderings with each other (determinism) and with generated/ on disk.
func TestGeneratedUpToDate(t *testing.T) {
	list, err := LoadAll(filepath.Join(root(t), "specs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list {
		p1, p2 := renderShipped(t, l), renderShipped(t, l)
		dir := filepath.Join(root(t), "generated", l.Spec.Name)
		onDisk, _ := filepath.Glob(filepath.Join(dir, "*"))
		if len(onDisk) != len(p1.Files) {
			t.Errorf("%s: %d files on disk, generator makes %d: run go generate ./...", l.Spec.Name, len(onDisk), len(p1.Files))
		}
		for name, data := range p1.Files {
			if !bytes.Equal(data, p2.Files[name]) {
				t.Errorf("%s/%s: two renderings differ: the generator is not deterministic", l.Spec.Name, name)
			}
			disk, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || !bytes.Equal(disk, data) {
				t.Errorf("%s/%s: differs from the generator's output: run go generate ./...", l.Spec.Name, name)
			}
			if !regexp.MustCompile(`(?m)\A// Code generated .* DO NOT EDIT\.$`).Match(data) {
				t.Errorf("%s/%s: does not begin with the standard Code generated line", l.Spec.Name, name)
			}
		}
	}
}

// TestEveryKernelAtEveryLevel checks that each shipped spec's every kernel
// is emitted in Go, AVX2 and AVX-512.
func TestEveryKernelAtEveryLevel(t *testing.T) {
	list, err := LoadAll(filepath.Join(root(t), "specs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list {
		p := renderShipped(t, l)
		for _, op := range catalog.Ops(l.Spec) {
			got := p.Levels[op.Field]
			sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
			if len(got) != 3 || got[0] != kernels.Go || got[1] != kernels.AVX2 || got[2] != kernels.AVX512 {
				t.Errorf("%s: %s emitted for %v, want go, avx2, avx512", l.Spec.Name, op.Field, got)
			}
		}
	}
}

var (
	textRE     = regexp.MustCompile(`(?m)^TEXT ·(\w+)\(SB\)`)
	requiresRE = regexp.MustCompile(`(?m)^// Requires: (.*)$`)
	highRegRE  = regexp.MustCompile(`\b[XYZ](1[6-9]|2[0-9]|3[01])\b|\bZ[0-9]+\b|\bK[1-7]\b`)
)

// TestAssemblyFeatures checks every TEXT block of the generated assembly:
// the features avo lists in its "Requires:" comment must be ones the
// runtime checks before dispatching to that level, and AVX2 code must use
// neither ZMM, nor K masks, nor the EVEX-only registers X16–X31/Y16–Y31
// (avo can hand those out silently; they fault on AVX2-only CPUs).
func TestAssemblyFeatures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(root(t), "generated", "*", "kernels_amd64.s"))
	if len(files) == 0 {
		t.Skip("no assembly generated yet")
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		blocks := textRE.FindAllSubmatchIndex(data, -1)
		for i, b := range blocks {
			name := string(data[b[2]:b[3]])
			end := len(data)
			if i+1 < len(blocks) {
				end = blocks[i+1][0]
			}
			// The Requires comment precedes the TEXT line.
			start := 0
			if i > 0 {
				start = blocks[i-1][1]
			}
			var level kernels.ISA
			switch {
			case strings.HasSuffix(name, "AVX512"):
				level = kernels.AVX512
			case strings.HasSuffix(name, "AVX2"):
				level = kernels.AVX2
			default:
				t.Errorf("%s: %s: name does not say its level", file, name)
				continue
			}
			allowed := map[string]bool{}
			for _, f := range level.Features() {
				allowed[f] = true
			}
			pre := data[start:b[0]]
			reqs := requiresRE.FindAllSubmatch(pre, -1)
			if len(reqs) == 0 {
				t.Errorf("%s: %s: no Requires comment", file, name)
				continue
			}
			for _, f := range strings.Split(string(reqs[len(reqs)-1][1]), ", ") {
				if !allowed[f] {
					t.Errorf("%s: %s requires %s, which dispatch does not check for %s", file, name, f, level)
				}
			}
			if level == kernels.AVX2 {
				body := data[b[0]:end]
				if m := highRegRE.Find(body); m != nil {
					t.Errorf("%s: %s uses %s, not available on AVX2-only CPUs", file, name, m)
				}
			}
		}
	}
}
