package model_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	_ "github.com/synthgen/synthgen/generated/all"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/specs"
)

// newModel builds spec name's model on its dispatched kernels.
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

// perturb moves every trainable parameter away from its initialisation so
// that no path of the network is degenerate (uniform attention, equal
// mixture weights, unit LayerNorm gains) and the attention logits matter
// enough for their parameters' gradients to stand well above the finite
// differences' noise.
//
// The ReLU of dense and factorized_dense (G = relu(w1·h)) would make the
// loss only piecewise smooth, with kinks wherever a pre-activation crosses
// 0; finite differences across kinks are no derivatives. So w1's bias is
// set to ±1 (random signs) and its weight kept small: the pre-activations
// stay near ±1, about half the units are dead (the ReLU's mask is still
// exercised) and almost none is within a step's reach of 0.
func perturb(m *model.Model, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, p := range m.Params {
		if p.Frozen {
			continue
		}
		if strings.HasSuffix(p.Name, ".w1.bias") {
			for i := range p.Data {
				p.Data[i] = float32(2*rng.IntN(2)-1) + float32(rng.NormFloat64()*0.05)
			}
			continue
		}
		std := 0.05
		switch name := p.Name; {
		case strings.HasSuffix(name, ".mix"):
			std = 0.5
		case strings.HasSuffix(name, ".R"), strings.HasSuffix(name, ".R1"), strings.HasSuffix(name, ".R2"):
			std = 0.5
		case strings.Contains(name, ".ln"):
			std = 0.1
		case strings.HasSuffix(name, ".w1.weight"):
			std = 0.02
		case strings.Contains(name, "attn."):
			std = 0.2
		}
		for i := range p.Data {
			p.Data[i] += float32(rng.NormFloat64() * std)
		}
	}
}

// tokens returns batch·t pseudo-random bytes and their shifted targets.
func tokens(seed uint64, batch, t int) (in, tg []int32) {
	rng := rand.New(rand.NewPCG(seed, 11))
	text := make([]int32, batch*(t+1))
	for i := range text {
		text[i] = int32(rng.IntN(256))
	}
	for b := 0; b < batch; b++ {
		in = append(in, text[b*(t+1):b*(t+1)+t]...)
		tg = append(tg, text[b*(t+1)+1:b*(t+1)+t+1]...)
	}
	return in, tg
}

// trainTargets returns what m's training pass takes besides the inputs
// of tokens: tg itself for a language model; for a classifier (every
// bidirectional spec is one) one label per sequence, the sequence's first
// target modulo the classes.
func trainTargets(m *model.Model, tg []int32, batch int) []int32 {
	k := m.Classes()
	if k == 0 || tg == nil {
		return tg
	}
	t := len(tg) / batch
	labels := make([]int32, batch)
	for b := range labels {
		labels[b] = tg[b*t] % int32(k)
	}
	return labels
}

// forward runs m's training pass on one batch: Forward for a language
// model, ForwardClassify for a classifier (tg then the labels, see
// trainTargets, or nil).
func forward(m *model.Model, ws *model.Workspace, in, tg []int32, batch int) float64 {
	if m.Classes() > 0 {
		return m.ForwardClassify(ws, in, tg, batch)
	}
	return m.Forward(ws, in, tg, batch)
}

// refWorst returns the largest difference between the logits of the last
// pass of ws (t positions per sequence) and refLoss's: the vocabulary
// logits of every position for a language model, the class logits of
// every sequence for a classifier.
func refWorst(m *model.Model, ws *model.Workspace, want [][]float64, batch, t int) float64 {
	worst := 0.0
	for b := 0; b < batch; b++ {
		if m.Classes() > 0 {
			got := ws.ClassLogits(b)
			for v, e := range want[b] {
				worst = math.Max(worst, math.Abs(float64(got[v])-e))
			}
			continue
		}
		for i := 0; i < t; i++ {
			got := ws.Logits(b, i)
			for v, e := range want[b*t+i] {
				worst = math.Max(worst, math.Abs(float64(got[v])-e))
			}
		}
	}
	return worst
}

type mismatch struct {
	name   string
	idx    int
	fd, an float64
}

func (x mismatch) String() string {
	return fmt.Sprintf("%s[%d]: finite difference %.6g, analytic %.6g", x.name, x.idx, x.fd, x.an)
}

// Finite-difference settings: central differences with step fdStep on the
// float32 parameter (the step actually taken is used), the loss summed in
// float64 by Forward; an entry passes when
// |fd − analytic| ≤ fdRel·max(|fd|, |analytic|) + fdAbs.
const (
	fdStep = 1e-2
	fdRel  = 1e-2
	fdAbs  = 1e-4
)

// active reports whether entry i of p can influence the loss at sequence
// length t: the card truncates every n-sized axis to its first t entries
// (and R to the causal triangle unless bidirectional; fa's output p feeds only columns p·b..,
// fb's output q only column q onwards).
func active(p *model.Param, s specs.Spec, t, i int) bool {
	sh := p.Shape
	switch name := p.Name; {
	case name == "pos_emb", strings.HasSuffix(name, ".R1"), strings.HasSuffix(name, ".R2"),
		strings.HasSuffix(name, ".w2.weight"):
		return i/sh[len(sh)-1]%sh[len(sh)-2] < t
	case strings.HasSuffix(name, ".w2.bias"):
		return i < t
	case strings.HasSuffix(name, ".attn.w"): // aft_full, aft_local: the causal triangle (band), or the square
		row, col := i/s.N, i%s.N
		if s.Bidirectional {
			return row < t && col < t && (s.Variant != "aft_local" || max(row-col, col-row) < s.Window)
		}
		return row < t && col <= row && (s.Variant != "aft_local" || row-col < s.Window)
	case strings.HasSuffix(name, ".attn.u"): // aft_conv: offsets < t (either side when bidirectional)
		if s.Bidirectional {
			off := i%(2*s.Window-1) - (s.Window - 1)
			return max(off, -off) < t
		}
		return i%s.Window < t
	case strings.HasSuffix(name, ".R"):
		row, col := i/s.N%s.N, i%s.N
		return row < t && (col <= row || s.Bidirectional && col < t)
	case strings.HasSuffix(name, ".fa.weight"), strings.HasSuffix(name, ".fa.bias"):
		return i/(len(p.Data)/sh[0])*s.B < t
	case strings.HasSuffix(name, ".fb.weight"), strings.HasSuffix(name, ".fb.bias"):
		return i/(len(p.Data)/sh[0]) < t
	}
	return true
}

// samples picks the entries of p to check: the two with the largest
// analytic gradient, three random entries of the part that can influence
// the loss, and one entry anywhere (perhaps in a truncated part, whose
// gradient must then be zero).
func samples(p *model.Param, s specs.Spec, t int, rng *rand.Rand) []int {
	top := []int{-1, -1}
	for i, g := range p.Grad {
		a := math.Abs(float64(g))
		switch {
		case a == 0:
		case top[0] < 0 || a > math.Abs(float64(p.Grad[top[0]])):
			top[0], top[1] = i, top[0]
		case top[1] < 0 || a > math.Abs(float64(p.Grad[top[1]])):
			top[1] = i
		}
	}
	var act []int
	for i := range p.Data {
		if active(p, s, t, i) {
			act = append(act, i)
		}
	}
	var out []int
	for _, i := range top {
		if i >= 0 {
			out = append(out, i)
		}
	}
	for k := 0; k < 3 && len(act) > 0; k++ {
		out = append(out, act[rng.IntN(len(act))])
	}
	return append(out, rng.IntN(len(p.Data)))
}

// checkGrads compares p.Grad (from the last Backward, at loss l0) with
// central differences of the loss (forward's: a classifier's with tg its
// labels) at the sampled entries of every given parameter.
//
// A ReLU (w1 of dense and factorized_dense) makes the loss only piecewise
// smooth, and a step that crosses a kink gives no estimate of the
// derivative. So a sample that fails at step fdStep is tried again at
// fdStep/2 and fdStep/4 (a kink farther away than the step no longer
// matters), and passes if any of them agrees. If none does, the one-sided
// differences at the smallest step tell a kink at the point itself (they
// disagree with each other, and the analytic value is one of them): the
// sample is then replaced by another entry (at most maxKinks per tensor).
// Anything else is a mismatch: a wrong gradient at a smooth point gives
// central differences that all disagree with it, and one-sided ones that
// agree with each other.
func checkGrads(m *model.Model, ws *model.Workspace, in, tg []int32, batch int, l0 float64, params []*model.Param, seed uint64) (bad []mismatch, checked, kinks int) {
	const maxKinks = 4
	rng := rand.New(rand.NewPCG(seed, 13))
	// diffs returns the central and the two one-sided differences at step h.
	diffs := func(p *model.Param, i int, h float64) (c, fwd, bwd float64) {
		orig := p.Data[i]
		up := float32(float64(orig) + h)
		dn := float32(float64(orig) - h)
		p.Data[i] = up
		lu := forward(m, ws, in, tg, batch)
		p.Data[i] = dn
		ld := forward(m, ws, in, tg, batch)
		p.Data[i] = orig
		return (lu - ld) / (float64(up) - float64(dn)),
			(lu - l0) / (float64(up) - float64(orig)),
			(l0 - ld) / (float64(orig) - float64(dn))
	}
	agree := func(x, y float64) bool {
		return math.Abs(x-y) <= fdRel*math.Max(math.Abs(x), math.Abs(y))+fdAbs
	}
	for _, p := range params {
		idx := samples(p, m.Spec, len(in)/batch, rng)
		tensorKinks := 0
		for q := 0; q < len(idx); q++ {
			i := idx[q]
			an := float64(p.Grad[i])
			var fd0, c, fwd, bwd float64
			ok := false
			for k, h := range []float64{fdStep, fdStep / 2, fdStep / 4} {
				c, fwd, bwd = diffs(p, i, h)
				if k == 0 {
					fd0 = c
				}
				if agree(c, an) {
					ok = true
					break
				}
			}
			switch {
			case ok:
				checked++
			case !agree(fwd, bwd) && (agree(fwd, an) || agree(bwd, an)) && tensorKinks < maxKinks:
				tensorKinks++
				kinks++
				idx = append(idx, rng.IntN(len(p.Data)))
			default:
				checked++
				bad = append(bad, mismatch{name: p.Name, idx: i, fd: fd0, an: an})
			}
		}
	}
	return bad, checked, kinks
}

// gradSpecs are the shipped specs the gradient check covers, with the t it
// uses: every synthesizer variant and the mixtures.
var gradSpecs = []struct {
	name string
	t    int
}{
	{"vanilla", 7}, {"dense", 7}, {"random", 7}, {"fixed_random", 7},
	{"factorized_random", 7}, {"factorized_dense", 12},
	{"random_vanilla", 7}, {"dense_vanilla", 7}, {"random_dense", 12}, {"odd", 12},
}

// verifyGrads checks the gradients of the given parameters after a
// Backward at loss: frozen parameters have none, no trainable one is all
// zero, and the sampled entries agree with finite differences.
func verifyGrads(m *model.Model, ws *model.Workspace, in, tg []int32, batch int, loss float64, params []*model.Param) (problems []string, checked, kinks int) {
	var check []*model.Param
	for _, p := range params {
		if p.Frozen {
			if p.Grad != nil {
				problems = append(problems, "frozen "+p.Name+" has a gradient")
			}
			continue
		}
		nz := false
		for _, g := range p.Grad {
			nz = nz || g != 0
		}
		if !nz {
			problems = append(problems, p.Name+": gradient is all zero")
		}
		check = append(check, p)
	}
	bad, checked, kinks := checkGrads(m, ws, in, tg, batch, loss, check, 4)
	for _, b := range bad {
		problems = append(problems, b.String())
	}
	return problems, checked, kinks
}

func TestGradients(t *testing.T) {
	for _, gs := range gradSpecs {
		if testing.Short() && gs.name != "odd" && gs.name != "vanilla" && gs.name != "random" {
			continue // odd mixes all five components; the others take seconds each
		}
		t.Run(gs.name, func(t *testing.T) {
			t.Parallel()
			m := newModel(t, gs.name, 1)
			m.SetWorkers(1)
			perturb(m, 2)
			const batch = 2
			ws := m.NewWorkspace(batch)
			in, tg := tokens(3, batch, gs.t)
			loss := m.Forward(ws, in, tg, batch)
			m.Backward(ws)
			if math.IsNaN(loss) || loss <= 0 {
				t.Fatalf("loss %v", loss)
			}
			problems, n, kinks := verifyGrads(m, ws, in, tg, batch, loss, m.Params)
			for _, p := range problems {
				t.Error(p)
			}
			t.Logf("%s: %d tensors, %d entries checked (%d replaced at ReLU kinks), %d problems (loss %.4f)",
				gs.name, len(m.Params), n, kinks, len(problems), loss)
		})
	}
}
