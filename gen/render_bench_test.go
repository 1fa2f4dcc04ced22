package gen

import (
	"path/filepath"
	"testing"
)

// BenchmarkRender renders each shipped spec's package in memory, as one
// go:generate line does minus the go command's start-up and the writes:
//
//	go test ./gen -run '^$' -bench Render
func BenchmarkRender(b *testing.B) {
	list, err := LoadAll(filepath.Join(root(b), "specs"))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range list {
		b.Run("spec="+l.Spec.Name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Render(l.Spec, Options{SpecRel: "spec.json"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
