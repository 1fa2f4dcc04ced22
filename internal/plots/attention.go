package plots

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// AttentionLayer is one picture of AttentionPNGs: a layer's heatmaps (one
// panel each) under a title.
type AttentionLayer struct {
	Title string
	Maps  []Heatmap
}

// CausalHeatmap is the heatmap of a causal attention map: the t×t
// row-major weights p, row i the weights query position i gives key
// positions j ≤ i; the masked entries j > i are NaN (drawn white).
func CausalHeatmap(title string, t int, p []float32) (Heatmap, error) {
	if t < 1 || len(p) != t*t {
		return Heatmap{}, fmt.Errorf("attention map %s: %d weights for a %d×%d matrix", title, len(p), t, t)
	}
	z := make([]float64, t*t)
	for i := 0; i < t; i++ {
		for j := 0; j < t; j++ {
			if j > i {
				z[i*t+j] = math.NaN()
			} else {
				z[i*t+j] = float64(p[i*t+j])
			}
		}
	}
	return Heatmap{Title: title, N: t, Z: z}, nil
}

// AttentionPNGs writes layers[l] into dir as <name>-layer<l>.png, a grid
// of its heatmaps under its title (AttentionGrid), creating dir if it is
// missing, and returns the files written. Each file is replaced
// atomically; an error names the file.
func AttentionPNGs(dir, name string, layers []AttentionLayer) ([]string, error) {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("output folder %s is a file, not a folder", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("output folder %s: %w", dir, err)
	}
	var files []string
	for l, layer := range layers {
		path := filepath.Join(dir, fmt.Sprintf("%s-layer%d.png", name, l))
		if err := WriteFile(path, func(w io.Writer) error { return AttentionGrid(w, layer.Maps, GridOptions{Title: layer.Title}) }); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}
