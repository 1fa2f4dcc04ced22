// Package plots draws synthgen's pictures as PNG images with
// gonum.org/v1/plot: the loss curves of a study (Loss), a classification
// study's accuracy curves (Accuracy) and grids of attention heatmaps
// (AttentionGrid), and the attention maps of a
// runtime/synth model as one grid per layer (AttentionPNGs).
package plots

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/synthgen/synthgen/internal/atomicfile"
)

// dpi of the PNGs: a vg.Inch is this many pixels.
const dpi = 96

// Point is one (x, y) point of a curve.
type Point struct{ X, Y float64 }

// Series is one model's curves against steps: training loss and
// validation loss (Loss), and a classifier's validation accuracy
// (Accuracy). Any may be empty.
type Series struct {
	Name  string
	Train []Point
	Val   []Point
	Acc   []Point // a share in [0, 1]
}

// LossOptions tune Loss. Zero values take the defaults.
type LossOptions struct {
	Title      string // above the picture
	TrainTitle string // the training panel's title (default "training loss")
	ValTitle   string // the validation panel's title (default "validation loss")
	YLabel     string // default "loss (nats per byte)"
	Width      int    // pixels (default 1400)
	Height     int    // pixels (default 620)
}

// colours is a categorical palette (Tableau's 10); series past the tenth
// reuse it with dashed lines.
var colours = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
	{0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

func lineStyle(i int) draw.LineStyle {
	ls := draw.LineStyle{Color: colours[i%len(colours)], Width: vg.Points(1.6)}
	switch (i / len(colours)) % 3 {
	case 1:
		ls.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	case 2:
		ls.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	}
	return ls
}

// Loss writes a PNG with two panels side by side, the training and the
// validation loss of every series against steps, one colour (and dash)
// per series, with a legend in the validation panel. The y axis starts
// at the lowest loss and ends a little above the highest loss after the
// first tenth of the steps, so the early descent is cut off rather than
// squashing the differences that matter.
func Loss(w io.Writer, series []Series, opt LossOptions) error {
	if len(series) == 0 {
		return fmt.Errorf("loss plot: no series")
	}
	if opt.Width <= 0 {
		opt.Width = 1400
	}
	if opt.Height <= 0 {
		opt.Height = 620
	}
	if opt.TrainTitle == "" {
		opt.TrainTitle = "training loss"
	}
	if opt.ValTitle == "" {
		opt.ValTitle = "validation loss"
	}
	if opt.YLabel == "" {
		opt.YLabel = "loss (nats per byte)"
	}
	xmax := 0.0
	for _, s := range series {
		for _, ps := range [][]Point{s.Train, s.Val} {
			for _, p := range ps {
				xmax = math.Max(xmax, p.X)
			}
		}
	}
	ylo, yhi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, ps := range [][]Point{s.Train, s.Val} {
			for _, p := range ps {
				if math.IsNaN(p.Y) || math.IsInf(p.Y, 0) {
					continue
				}
				ylo = math.Min(ylo, p.Y)
				if p.X >= xmax/10 {
					yhi = math.Max(yhi, p.Y)
				}
			}
		}
	}
	if math.IsInf(ylo, 0) {
		return fmt.Errorf("loss plot: no finite loss in %d series", len(series))
	}
	if math.IsInf(yhi, 0) || yhi <= ylo {
		yhi = ylo + 1
	}
	pad := (yhi - ylo) * 0.04
	panel := func(title string, pick func(Series) []Point, legend bool) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "step"
		p.Y.Label.Text = opt.YLabel
		p.Add(plotter.NewGrid())
		for i, s := range series {
			pts := pick(s)
			if len(pts) == 0 {
				continue
			}
			xy := make(plotter.XYs, 0, len(pts))
			for _, q := range pts {
				if !math.IsNaN(q.Y) && !math.IsInf(q.Y, 0) {
					xy = append(xy, plotter.XY{X: q.X, Y: q.Y})
				}
			}
			if len(xy) == 0 {
				continue
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, fmt.Errorf("loss plot: series %s: %w", s.Name, err)
			}
			l.LineStyle = lineStyle(i)
			p.Add(l)
			if legend {
				p.Legend.Add(s.Name, l)
			}
		}
		// After the plotters: Add widens the axes to their data.
		p.X.Min, p.X.Max = 0, math.Max(xmax, 1)
		p.Y.Min, p.Y.Max = ylo-pad, yhi+pad
		p.Legend.Top = true
		p.Legend.ThumbnailWidth = vg.Points(24)
		p.Legend.TextStyle.Font.Size = vg.Points(9)
		return p, nil
	}
	tp, err := panel(opt.TrainTitle, func(s Series) []Point { return s.Train }, false)
	if err != nil {
		return err
	}
	vp, err := panel(opt.ValTitle, func(s Series) []Point { return s.Val }, true)
	if err != nil {
		return err
	}
	c := vgimg.NewWith(vgimg.UseWH(px(opt.Width), px(opt.Height)), vgimg.UseDPI(dpi), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(c)
	top := titled(dc, opt.Title, 14)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(12), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	for i, p := range []*plot.Plot{tp, vp} {
		p.Draw(tiles.At(top, i, 0))
	}
	return writePNG(w, c)
}

// AccuracyOptions tune Accuracy. Zero values take the defaults.
type AccuracyOptions struct {
	Title  string  // above the panel (default "validation accuracy")
	Chance float64 // a dashed line at this accuracy (0: none)
	// ChanceLabel is the dashed line's legend (default "chance").
	ChanceLabel string
	Width       int // pixels (default 700)
	Height      int // pixels (default 620)
}

// Accuracy writes a PNG with one panel, the validation accuracy of every
// series (Series.Acc) in percent against steps, in the colours (and
// dashes) of Loss, with a legend. The y axis spans the accuracies (and
// Chance) with a little room, within 0–100%.
func Accuracy(w io.Writer, series []Series, opt AccuracyOptions) error {
	if opt.Width <= 0 {
		opt.Width = 700
	}
	if opt.Height <= 0 {
		opt.Height = 620
	}
	if opt.Title == "" {
		opt.Title = "validation accuracy"
	}
	p := plot.New()
	p.Title.Text = opt.Title
	p.X.Label.Text = "step"
	p.Y.Label.Text = "accuracy (%)"
	p.Add(plotter.NewGrid())
	xmax, ylo, yhi := 0.0, math.Inf(1), math.Inf(-1)
	if opt.Chance > 0 {
		ylo, yhi = 100*opt.Chance, 100*opt.Chance
	}
	drawn := 0
	for i, s := range series {
		xy := make(plotter.XYs, 0, len(s.Acc))
		for _, q := range s.Acc {
			if q.Y >= 0 && q.Y <= 1 { // not NaN
				xy = append(xy, plotter.XY{X: q.X, Y: 100 * q.Y})
				xmax, ylo, yhi = math.Max(xmax, q.X), math.Min(ylo, 100*q.Y), math.Max(yhi, 100*q.Y)
			}
		}
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return fmt.Errorf("accuracy plot: series %s: %w", s.Name, err)
		}
		l.LineStyle = lineStyle(i)
		p.Add(l)
		p.Legend.Add(s.Name, l)
		drawn++
	}
	if drawn == 0 {
		return fmt.Errorf("accuracy plot: no accuracy in %d series", len(series))
	}
	if opt.Chance > 0 {
		c, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 100 * opt.Chance}, {X: math.Max(xmax, 1), Y: 100 * opt.Chance}})
		if err != nil {
			return fmt.Errorf("accuracy plot: chance line: %w", err)
		}
		c.LineStyle = draw.LineStyle{Color: color.Gray{0x60}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(4)}}
		p.Add(c)
		if opt.ChanceLabel == "" {
			opt.ChanceLabel = "chance"
		}
		p.Legend.Add(opt.ChanceLabel, c)
	}
	pad := math.Max(1, (yhi-ylo)*0.06)
	p.X.Min, p.X.Max = 0, math.Max(xmax, 1)
	p.Y.Min, p.Y.Max = math.Max(0, ylo-pad), math.Min(100, yhi+pad)
	p.Legend.Top = true
	p.Legend.ThumbnailWidth = vg.Points(24)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	c := vgimg.NewWith(vgimg.UseWH(px(opt.Width), px(opt.Height)), vgimg.UseDPI(dpi), vgimg.UseBackgroundColor(color.White))
	p.Draw(draw.Crop(draw.New(c), vg.Points(4), -vg.Points(10), vg.Points(4), -vg.Points(6)))
	return writePNG(w, c)
}

// Heatmap is one panel of AttentionGrid: a square matrix drawn with row
// 0 at the top, NaN entries (the causal mask) blank.
type Heatmap struct {
	Title string
	N     int       // rows and columns
	Z     []float64 // row-major N·N: Z[i·N+j] is row i (y), column j (x)
}

// GridOptions tune AttentionGrid. Zero values take the defaults.
type GridOptions struct {
	Title  string // above the grid: what the maps show
	XLabel string // default "key position j"
	YLabel string // default "query position i"
	Cols   int    // panels per row (default ⌈√panels⌉)
	Panel  int    // a panel's side in pixels (default 340)
}

// AttentionGrid writes a PNG of heatmaps in a grid, each with its title,
// under a common title. Colours follow gonum's perceptually uniform
// Kindlmann palette (moreland) from 0 (dark) to the panel's 99.5th
// percentile of its finite values, which the panel's title states
// ("max 0.31"); larger values saturate. Masked (NaN) entries are white.
func AttentionGrid(w io.Writer, maps []Heatmap, opt GridOptions) error {
	if len(maps) == 0 {
		return fmt.Errorf("attention grid: no maps")
	}
	if opt.Cols <= 0 {
		opt.Cols = int(math.Ceil(math.Sqrt(float64(len(maps)))))
	}
	if opt.Panel <= 0 {
		opt.Panel = 340
	}
	if opt.XLabel == "" {
		opt.XLabel = "key position j"
	}
	if opt.YLabel == "" {
		opt.YLabel = "query position i"
	}
	rows := (len(maps) + opt.Cols - 1) / opt.Cols
	cm := moreland.Kindlmann()
	pal := cm.Palette(255)
	cols := pal.Colors()
	var plots []*plot.Plot
	for k, hm := range maps {
		if hm.N < 1 || len(hm.Z) != hm.N*hm.N {
			return fmt.Errorf("attention grid: map %d (%s): %d values for a %d×%d matrix", k, hm.Title, len(hm.Z), hm.N, hm.N)
		}
		hi := percentile(hm.Z, 0.995)
		if !(hi > 0) {
			hi = 1
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s (colour 0–%.3g)", hm.Title, hi)
		p.Title.TextStyle.Font.Size = vg.Points(10)
		p.X.Label.Text = opt.XLabel
		p.Y.Label.Text = opt.YLabel
		p.X.Label.TextStyle.Font.Size = vg.Points(8)
		p.Y.Label.TextStyle.Font.Size = vg.Points(8)
		p.X.Tick.Marker = intTicks{}
		p.Y.Tick.Marker = intTicks{flip: hm.N - 1}
		h := plotter.NewHeatMap(grid{hm}, palette.Palette(pal))
		h.Min, h.Max = 0, hi
		h.Overflow = cols[len(cols)-1]
		h.NaN = color.White
		h.Rasterized = true
		p.Add(h)
		p.X.Min, p.X.Max = -0.5, float64(hm.N)-0.5
		p.Y.Min, p.Y.Max = -0.5, float64(hm.N)-0.5
		plots = append(plots, p)
	}
	width := opt.Cols*opt.Panel + 20
	height := rows*opt.Panel + 60
	c := vgimg.NewWith(vgimg.UseWH(px(width), px(height)), vgimg.UseDPI(dpi), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(c)
	top := titled(dc, opt.Title, 12)
	tiles := draw.Tiles{Rows: rows, Cols: opt.Cols, PadX: vg.Points(10), PadY: vg.Points(10), PadTop: vg.Points(4), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(10)}
	for k, p := range plots {
		p.Draw(tiles.At(top, k%opt.Cols, k/opt.Cols))
	}
	return writePNG(w, c)
}

// grid adapts a Heatmap to plotter.GridXYZ: column c is x = c; the y
// axis grows upwards, so matrix row i is drawn at y = N−1−i, row 0 at the
// top (intTicks labels the axis with i).
type grid struct{ h Heatmap }

func (g grid) Dims() (c, r int)   { return g.h.N, g.h.N }
func (g grid) Z(c, r int) float64 { return g.h.Z[(g.h.N-1-r)*g.h.N+c] }
func (g grid) X(c int) float64    { return float64(c) }
func (g grid) Y(r int) float64    { return float64(r) }

// intTicks are integer ticks; with flip > 0 the tick at y is labelled
// flip−y (a matrix row index on an upward axis).
type intTicks struct{ flip int }

func (t intTicks) Ticks(lo, hi float64) []plot.Tick {
	if t.flip > 0 {
		lo, hi = float64(t.flip)-hi, float64(t.flip)-lo
	}
	var out []plot.Tick
	for _, tk := range (plot.DefaultTicks{}).Ticks(lo, hi) {
		if tk.Value != math.Trunc(tk.Value) {
			continue
		}
		lbl := ""
		if tk.Label != "" {
			lbl = strconv.Itoa(int(tk.Value))
		}
		v := tk.Value
		if t.flip > 0 {
			v = float64(t.flip) - v
		}
		out = append(out, plot.Tick{Value: v, Label: lbl})
	}
	return out
}

// percentile is the q-quantile of the finite values of z (0 if none).
func percentile(z []float64, q float64) float64 {
	var v []float64
	for _, x := range z {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[min(len(v)-1, int(q*float64(len(v))))]
}

// titled draws title (if any) at the top of c and returns the rest of c.
func titled(c draw.Canvas, title string, size float64) draw.Canvas {
	if title == "" {
		return c
	}
	sty := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, vg.Points(size)), XAlign: draw.XCenter, YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
	title = fit(sty, title, c.Max.X-c.Min.X-vg.Points(16))
	pt := vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: c.Max.Y - vg.Points(6)}
	c.FillText(sty, pt, title)
	h := sty.Height(title) + vg.Points(10)
	c.Max.Y -= h
	return c
}

// fit breaks each line of s at spaces so that it is at most width wide
// in style sty.
func fit(sty draw.TextStyle, s string, width vg.Length) string {
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, w := range strings.Fields(para) {
			try := w
			if line != "" {
				try = line + " " + w
			}
			if line != "" && sty.Width(try) > width {
				out = append(out, line)
				line = w
				continue
			}
			line = try
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func px(n int) vg.Length { return vg.Length(n) * vg.Inch / dpi }

func writePNG(w io.Writer, c *vgimg.Canvas) error {
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); err != nil {
		return fmt.Errorf("write PNG: %w", err)
	}
	return nil
}

// WriteFile writes the PNG that draw writes to path, atomically (a
// temporary file in the same folder, then a rename: atomicfile.Write),
// so a failure leaves any previous file at path intact.
func WriteFile(path string, draw func(io.Writer) error) error {
	return atomicfile.Write(path, draw)
}
