package model_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/specs"
)

// newClassifier builds a classifier of classes classes on the kernels of
// the shipped spec name (the kernels do not depend on the task).
func newClassifier(t testing.TB, name string, classes int, seed uint64) *model.Model {
	t.Helper()
	k, err := kernels.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	s := k.Spec
	s.Name = name + "_cls"
	s.Task, s.Classes = specs.TaskClassify, classes
	m, err := model.New(s, k, seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// classSeqs returns sequences of the given lengths of pseudo-random bytes
// and pseudo-random labels in [0, classes).
func classSeqs(seed uint64, classes int, lens ...int) ([][]int32, []int32) {
	rng := rand.New(rand.NewPCG(seed, 17))
	seqs := make([][]int32, len(lens))
	labels := make([]int32, len(lens))
	for i, n := range lens {
		for range n {
			seqs[i] = append(seqs[i], int32(rng.IntN(256)))
		}
		labels[i] = int32(rng.IntN(classes))
	}
	return seqs, labels
}

// checkGradsOf is checkGrads for any loss function (see there: central
// differences at three steps, kinks of a ReLU replaced by other entries).
func checkGradsOf(loss func() float64, l0 float64, s specs.Spec, t int, params []*model.Param, seed uint64) (bad []mismatch, checked int) {
	const maxKinks = 4
	rng := rand.New(rand.NewPCG(seed, 13))
	diffs := func(p *model.Param, i int, h float64) (c, fwd, bwd float64) {
		orig := p.Data[i]
		up, dn := float32(float64(orig)+h), float32(float64(orig)-h)
		p.Data[i] = up
		lu := loss()
		p.Data[i] = dn
		ld := loss()
		p.Data[i] = orig
		return (lu - ld) / (float64(up) - float64(dn)), (lu - l0) / (float64(up) - float64(orig)), (l0 - ld) / (float64(orig) - float64(dn))
	}
	agree := func(x, y float64) bool {
		return math.Abs(x-y) <= fdRel*math.Max(math.Abs(x), math.Abs(y))+fdAbs
	}
	for _, p := range params {
		if p.Frozen {
			continue
		}
		idx := samples(p, s, t, rng)
		kinks := 0
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
			case !agree(fwd, bwd) && (agree(fwd, an) || agree(bwd, an)) && kinks < maxKinks:
				kinks++
				idx = append(idx, rng.IntN(len(p.Data)))
			default:
				checked++
				bad = append(bad, mismatch{name: p.Name, idx: i, fd: fd0, an: an})
			}
		}
	}
	return bad, checked
}

// TestClassifyGradients checks every gradient of a classifier (the head,
// the pooling, lnf and the blocks below) against finite differences of the
// mean loss of a batch of sequences of unequal lengths, which ClassifyBatch
// runs as length groups.
func TestClassifyGradients(t *testing.T) {
	for _, name := range []string{"odd", "odd_linear", "odd_aft_full"} {
		t.Run(name, func(t *testing.T) {
			m := newClassifier(t, name, 5, 1)
			m.SetWorkers(1)
			perturb(m, 2)
			for _, p := range m.Params {
				if strings.HasPrefix(p.Name, "head.") { // a head far from zero: large, informative gradients
					for i := range p.Data {
						p.Data[i] += float32(math.Sin(float64(i))) * 0.5
					}
				}
			}
			seqs, labels := classSeqs(3, 5, 7, 4, 7, 11)
			ws := m.NewWorkspace(len(seqs))
			loss := m.ClassifyBatch(ws, seqs, labels, true)
			if math.IsNaN(loss) || loss <= 0 {
				t.Fatalf("loss %v", loss)
			}
			for _, p := range m.Params {
				nz := false
				for _, g := range p.Grad {
					nz = nz || g != 0
				}
				if !nz && !p.Frozen {
					t.Errorf("%s: gradient is all zero", p.Name)
				}
			}
			if g := m.Param("tok_emb").Grad; g[0] != 0 && !usesToken(seqs, 0) {
				t.Errorf("tok_emb of an unused token has gradient %g: tok_emb must be only the input embedding", g[0])
			}
			f := func() float64 { return m.ClassifyBatch(ws, seqs, labels, false) }
			bad, n := checkGradsOf(f, loss, m.Spec, 11, m.Params, 4)
			for _, b := range bad {
				t.Error(b)
			}
			t.Logf("%s: %d entries checked, %d mismatches (loss %.4f)", name, n, len(bad), loss)
		})
	}
}

func usesToken(seqs [][]int32, tok int32) bool {
	for _, s := range seqs {
		for _, v := range s {
			if v == tok {
				return true
			}
		}
	}
	return false
}

// TestClassifyGradCheckCatches makes sure the gradient check can fail: a
// wrong head gradient and a wrong pooling (the head's input scaled) are
// caught.
func TestClassifyGradCheckCatches(t *testing.T) {
	m := newClassifier(t, "odd", 4, 1)
	m.SetWorkers(1)
	perturb(m, 2)
	seqs, labels := classSeqs(5, 4, 6, 6, 9)
	ws := m.NewWorkspace(len(seqs))
	loss := m.ClassifyBatch(ws, seqs, labels, true)
	hw := m.Param("head.weight")
	for i := range hw.Grad {
		hw.Grad[i] *= 1.3
	}
	f := func() float64 { return m.ClassifyBatch(ws, seqs, labels, false) }
	bad, _ := checkGradsOf(f, loss, m.Spec, 9, []*model.Param{hw}, 4)
	if len(bad) == 0 {
		t.Fatal("a corrupted head.weight gradient passed the finite-difference check")
	}
	// A gradient of the pooling that is off by the sequence's length:
	// lnf.bias's gradient is Σ over positions of ∂loss/∂h, and with the
	// pooling's 1/t missing it would be t times larger.
	loss = m.ClassifyBatch(ws, seqs, labels, true)
	lb := m.Param("lnf.bias")
	for i := range lb.Grad {
		lb.Grad[i] *= 6
	}
	bad, _ = checkGradsOf(f, loss, m.Spec, 9, []*model.Param{lb}, 4)
	if len(bad) == 0 {
		t.Fatal("an lnf.bias gradient without the pooling's 1/t passed the finite-difference check")
	}
}

// TestClassifyPadding checks that a sequence's logits do not depend on the
// other sequences of its batch or their lengths: alone, in a batch of
// sequences of other lengths (which a padded batch would pad it to), and
// in a batch of one length through ForwardClassify, bit for bit.
func TestClassifyPadding(t *testing.T) {
	for _, name := range []string{"odd", "odd_aft_full", "odd_linear"} {
		t.Run(name, func(t *testing.T) {
			m := newClassifier(t, name, 3, 1)
			perturb(m, 2)
			seqs, labels := classSeqs(7, 3, 5, 60, 1, 5, 17, 33)
			ws := m.NewWorkspace(len(seqs))
			m.ClassifyBatch(ws, seqs, labels, false)
			mixed := make([][]float32, len(seqs))
			for i := range seqs {
				mixed[i] = append([]float32(nil), ws.ClassLogits(i)...)
			}
			for i, s := range seqs {
				m.ClassifyBatch(ws, [][]int32{s}, nil, false)
				alone := ws.ClassLogits(0)
				for j := range alone {
					if alone[j] != mixed[i][j] {
						t.Fatalf("sequence %d (%d tokens): logit %d is %v alone, %v in a batch of other lengths", i, len(s), j, alone[j], mixed[i][j])
					}
				}
			}
			// Sequences 0 and 3 have length 5: one ForwardClassify.
			in := append(append([]int32(nil), seqs[0]...), seqs[3]...)
			loss := m.ForwardClassify(ws, in, []int32{labels[0], labels[3]}, 2)
			want := 0.0
			for b, i := range []int{0, 3} {
				got := ws.ClassLogits(b)
				for j := range got {
					if got[j] != mixed[i][j] {
						t.Fatalf("ForwardClassify: sequence %d logit %d is %v, ClassifyBatch gave %v", i, j, got[j], mixed[i][j])
					}
				}
				mx, s := math.Inf(-1), 0.0
				for _, v := range got {
					mx = math.Max(mx, float64(v))
				}
				for _, v := range got {
					s += math.Exp(float64(v) - mx)
				}
				want += (mx + math.Log(s) - float64(got[labels[i]])) / 2
			}
			if math.Abs(loss-want) > 1e-5 {
				t.Fatalf("loss %v, the logits' cross-entropy is %v", loss, want)
			}
		})
	}
}

// TestClassifyDeterminism: the loss and gradients of a batch of unequal
// lengths are bit-identical for any number of workers.
func TestClassifyDeterminism(t *testing.T) {
	var ref [][]float32
	var refLoss float64
	for _, w := range []int{1, 2, 3} {
		m := newClassifier(t, "odd", 4, 1)
		m.SetWorkers(w)
		perturb(m, 2)
		seqs, labels := classSeqs(9, 4, 8, 3, 8, 20)
		ws := m.NewWorkspace(4)
		loss := m.ClassifyBatch(ws, seqs, labels, true)
		g := gradsOf(m)
		if ref == nil {
			ref, refLoss = g, loss
			continue
		}
		if loss != refLoss {
			t.Fatalf("%d workers: loss %v, 1 worker: %v", w, loss, refLoss)
		}
		for i := range g {
			for j := range g[i] {
				if g[i][j] != ref[i][j] {
					t.Fatalf("%d workers: %s grad[%d] = %v, 1 worker: %v", w, m.Params[i].Name, j, g[i][j], ref[i][j])
				}
			}
		}
	}
}

// TestClassifyParams checks the head's names, shapes, place and
// initialisation, and that the language model's parameters are unchanged.
func TestClassifyParams(t *testing.T) {
	m := newClassifier(t, "odd", 7, 1)
	lm := newModel(t, "odd", 1)
	if len(m.Params) != len(lm.Params)+2 {
		t.Fatalf("%d params, the language model has %d", len(m.Params), len(lm.Params))
	}
	for i, p := range lm.Params {
		q := m.Params[i]
		if q.Name != p.Name {
			t.Fatalf("param %d: %s, the language model has %s", i, q.Name, p.Name)
		}
		for j := range p.Data {
			if p.Data[j] != q.Data[j] {
				t.Fatalf("%s[%d]: %v, the language model's initialisation %v", p.Name, j, q.Data[j], p.Data[j])
			}
		}
	}
	hw, hb := m.Params[len(m.Params)-2], m.Params[len(m.Params)-1]
	if hw.Name != "head.weight" || len(hw.Shape) != 2 || hw.Shape[0] != 7 || hw.Shape[1] != m.Spec.D || !hw.Decay {
		t.Fatalf("head weight %s %v decay %v", hw.Name, hw.Shape, hw.Decay)
	}
	if hb.Name != "head.bias" || len(hb.Shape) != 1 || hb.Shape[0] != 7 || hb.Decay {
		t.Fatalf("head bias %s %v decay %v", hb.Name, hb.Shape, hb.Decay)
	}
	for _, v := range hb.Data {
		if v != 0 {
			t.Fatal("head.bias is not initialised to 0")
		}
	}
	if mean, sd := stats(hw.Data); math.Abs(mean) > 0.01 || math.Abs(sd-0.02) > 0.004 {
		t.Fatalf("head.weight mean %v sd %v, want N(0, 0.02²)", mean, sd)
	}
	if m.Classes() != 7 || lm.Classes() != 0 {
		t.Fatalf("Classes %d and %d", m.Classes(), lm.Classes())
	}
}

// TestClassifyMisuse: the language model's and the classifier's passes
// refuse each other's model.
func TestClassifyMisuse(t *testing.T) {
	m := newClassifier(t, "odd", 3, 1)
	lm := newModel(t, "odd", 1)
	in, tg := tokens(1, 1, 4)
	mustPanic(t, "Forward on a classifier", func() { m.Forward(m.NewWorkspace(1), in, tg, 1) })
	mustPanic(t, "ForwardClassify on a language model", func() { lm.ForwardClassify(lm.NewWorkspace(1), in, []int32{0}, 1) })
	mustPanic(t, "label out of range", func() { m.ForwardClassify(m.NewWorkspace(1), in, []int32{3}, 1) })
	mustPanic(t, "too long", func() { m.ClassifyBatch(m.NewWorkspace(1), [][]int32{make([]int32, 61)}, nil, false) })
	mustPanic(t, "empty", func() { m.ClassifyBatch(m.NewWorkspace(1), [][]int32{{}}, nil, false) })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}
