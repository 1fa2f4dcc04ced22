package plots_test

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/internal/plots"
)

// colours counts the distinct colours of img inside r.
func colours(img image.Image, r image.Rectangle) int {
	seen := map[[4]uint32]bool{}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c0, c1, c2, c3 := img.At(x, y).RGBA()
			seen[[4]uint32{c0, c1, c2, c3}] = true
		}
	}
	return len(seen)
}

func decode(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestLoss: the loss plot is a PNG of the asked size whose two panels
// both hold drawn curves (many colours in their middle, not a blank).
func TestLoss(t *testing.T) {
	var series []plots.Series
	for k := 0; k < 12; k++ {
		s := plots.Series{Name: "spec" + string(rune('a'+k))}
		for step := 1; step <= 200; step++ {
			y := 2 + 3*math.Exp(-float64(step)/40) + 0.05*float64(k) + 0.05*math.Sin(float64(step*(k+1)))
			s.Train = append(s.Train, plots.Point{X: float64(step), Y: y})
			if step%20 == 0 {
				s.Val = append(s.Val, plots.Point{X: float64(step), Y: y + 0.1})
			}
		}
		series = append(series, s)
	}
	var buf bytes.Buffer
	if err := plots.Loss(&buf, series, plots.LossOptions{Title: "test", Width: 900, Height: 400}); err != nil {
		t.Fatal(err)
	}
	img := decode(t, buf.Bytes())
	if b := img.Bounds(); b.Dx() != 900 || b.Dy() != 400 {
		t.Fatalf("size %v, want 900×400", b)
	}
	for _, x0 := range []int{100, 550} { // the training and the validation panel
		if n := colours(img, image.Rect(x0, 80, x0+250, 330)); n < 8 {
			t.Errorf("panel at x %d: %d colours: blank", x0, n)
		}
	}
	if err := plots.Loss(&buf, nil, plots.LossOptions{}); err == nil {
		t.Error("no series: no error")
	}
}

// TestAccuracy: the accuracy plot is a PNG of the asked size whose panel
// holds drawn curves; series without accuracy are skipped, none at all is
// an error.
func TestAccuracy(t *testing.T) {
	var series []plots.Series
	for k := 0; k < 3; k++ {
		s := plots.Series{Name: "spec" + string(rune('a'+k))}
		for step := 0; step <= 200; step += 20 {
			s.Acc = append(s.Acc, plots.Point{X: float64(step), Y: 0.9 - 0.6*math.Exp(-float64(step)/50) - 0.05*float64(k)})
		}
		series = append(series, s)
	}
	series = append(series, plots.Series{Name: "none"})
	var buf bytes.Buffer
	if err := plots.Accuracy(&buf, series, plots.AccuracyOptions{Title: "test", Chance: 0.1, Width: 500, Height: 400}); err != nil {
		t.Fatal(err)
	}
	img := decode(t, buf.Bytes())
	if b := img.Bounds(); b.Dx() != 500 || b.Dy() != 400 {
		t.Fatalf("size %v, want 500×400", b)
	}
	if n := colours(img, image.Rect(100, 80, 450, 330)); n < 8 {
		t.Errorf("panel: %d colours: blank", n)
	}
	if err := plots.Accuracy(&buf, series[3:], plots.AccuracyOptions{}); err == nil {
		t.Error("no accuracy: no error")
	}
}

// TestAttentionGrid: one panel per map in a grid, each with the palette's
// colours (not blank), and white above the diagonal.
func TestAttentionGrid(t *testing.T) {
	const n = 16
	var maps []plots.Heatmap
	for h := 0; h < 4; h++ {
		z := make([]float64, n*n)
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if j > i {
					z[i*n+j] = math.NaN()
				} else {
					z[i*n+j] = float64((i*j+h)%7) / 7
				}
			}
		}
		maps = append(maps, plots.Heatmap{Title: "head", N: n, Z: z})
	}
	var buf bytes.Buffer
	if err := plots.AttentionGrid(&buf, maps, plots.GridOptions{Title: "what is shown"}); err != nil {
		t.Fatal(err)
	}
	img := decode(t, buf.Bytes())
	if b := img.Bounds(); b.Dx() != 2*340+20 || b.Dy() != 2*340+60 {
		t.Fatalf("size %v", b)
	}
	// The lower-left part of each panel's plot area is coloured, the
	// upper-right white.
	for _, o := range []image.Point{{0, 0}, {350, 0}, {0, 340}, {350, 340}} {
		lo := image.Rect(o.X+80, o.Y+250, o.X+130, o.Y+300)
		if k := colours(img, lo); k < 3 {
			t.Errorf("panel at %v: %d colours below the diagonal", o, k)
		}
		hi := image.Rect(o.X+280, o.Y+90, o.X+310, o.Y+110)
		if k := colours(img, hi); k != 1 {
			t.Errorf("panel at %v: %d colours above the diagonal, want white only", o, k)
		}
	}
	if err := plots.AttentionGrid(&buf, []plots.Heatmap{{N: 3, Z: make([]float64, 4)}}, plots.GridOptions{}); err == nil {
		t.Error("a map of the wrong size: no error")
	}
}

// TestAttentionPNGs: plain causal grids as one PNG per layer, not blank,
// into a folder created on the way; an error names the file it could not
// write.
func TestAttentionPNGs(t *testing.T) {
	const T = 24
	var layers []plots.AttentionLayer
	for l := 0; l < 2; l++ {
		var hms []plots.Heatmap
		for h := 0; h < 2; h++ {
			p := make([]float32, T*T)
			for i := 0; i < T; i++ {
				for j := 0; j <= i; j++ {
					p[i*T+j] = float32((i*7+j*3+h+l)%11) / 10
				}
			}
			hm, err := plots.CausalHeatmap(fmt.Sprintf("layer %d, head %d", l, h), T, p)
			if err != nil {
				t.Fatal(err)
			}
			if !math.IsNaN(hm.Z[1]) || hm.Z[T] != float64(p[T]) {
				t.Fatalf("causal mask: %v %v", hm.Z[1], hm.Z[T])
			}
			hms = append(hms, hm)
		}
		layers = append(layers, plots.AttentionLayer{Title: fmt.Sprintf("spec x, layer %d", l), Maps: hms})
	}
	dir := filepath.Join(t.TempDir(), "new", "attn")
	files, err := plots.AttentionPNGs(dir, "x", layers)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[1] != filepath.Join(dir, "x-layer1.png") {
		t.Fatalf("files %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		img := decode(t, b)
		bd := img.Bounds()
		if bd.Dx() != 2*340+20 || bd.Dy() != 340+60 {
			t.Errorf("%s: size %v", f, bd)
		}
		if k := colours(img, image.Rect(60, 100, 330, 380)); k < 10 {
			t.Errorf("%s: %d colours in the first panel", f, k)
		}
	}
	if _, err := plots.CausalHeatmap("bad", 3, make([]float32, 4)); err == nil {
		t.Error("a map of the wrong size: no error")
	}
	// A folder where a picture should go: the error names the picture.
	if err := os.Mkdir(filepath.Join(dir, "y-layer0.png"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = plots.AttentionPNGs(dir, "y", layers)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "y-layer0.png")) || strings.Contains(err.Error(), ".tmp") {
		t.Errorf("writing over a folder: %v", err)
	}
}
