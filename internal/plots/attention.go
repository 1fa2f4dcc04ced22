package plots

import (
	"fmt"
	"io"
	"math"
	"path/filepath"

	"github.com/synthgen/synthgen/runtime/synth"
)

// AttentionPNGs writes one PNG per layer of a's maps into dir, named
// <spec>-layer<l>.png: a grid with one heatmap per head (or a single one
// when the heads share it), each titled, under a title that says what the
// maps show (a.What). Rows are query positions (top to bottom), columns
// key positions; the masked upper triangle is white. It returns the files
// written; dir must exist.
func AttentionPNGs(dir string, a *synth.Attention) ([]string, error) {
	var files []string
	for l, layer := range a.Maps {
		var hms []Heatmap
		for _, m := range layer {
			z := make([]float64, m.T*m.T)
			for i := 0; i < m.T; i++ {
				for j := 0; j < m.T; j++ {
					if j > i {
						z[i*m.T+j] = math.NaN()
					} else {
						z[i*m.T+j] = float64(m.At(i, j))
					}
				}
			}
			title := fmt.Sprintf("layer %d, head %d", m.Layer, m.Head)
			if m.Head < 0 {
				title = fmt.Sprintf("layer %d, all heads (shared)", m.Layer)
			}
			hms = append(hms, Heatmap{Title: title, N: m.T, Z: z})
		}
		prompt := "prompt: " + quote(a.Prompt, 60)
		if !a.InputDependent {
			prompt = fmt.Sprintf("shown for t = %d", len(a.Prompt))
		}
		title := fmt.Sprintf("%s (%s), step %d, layer %d: %s\n%s", a.Spec.Name, a.Spec.Variant, a.Step, l, a.What, prompt)
		path := filepath.Join(dir, fmt.Sprintf("%s-layer%d.png", a.Spec.Name, l))
		if err := WriteFile(path, func(w io.Writer) error { return AttentionGrid(w, hms, GridOptions{Title: title}) }); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}

// quote is b as a Go string literal, cut to about n characters.
func quote(b []byte, n int) string {
	q := []rune(fmt.Sprintf("%q", b))
	if len(q) > n {
		return string(q[:n]) + "…"
	}
	return string(q)
}
