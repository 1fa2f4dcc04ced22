package model_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/specs"
)

// TestGradCheckCatchesBrokenGradients makes sure the gradient check can
// fail: each listed gradient, doubled, negated or zeroed, must be reported.
// (k's bias is not in the list: softmax is invariant to it, its true
// gradient is 0.)
func TestGradCheckCatchesBrokenGradients(t *testing.T) {
	m := newModel(t, "odd", 1)
	m.SetWorkers(1)
	perturb(m, 2)
	const batch = 2
	ws := m.NewWorkspace(batch)
	in, tg := tokens(3, batch, 12)
	loss := m.Forward(ws, in, tg, batch)
	m.Backward(ws)
	names := []string{"tok_emb", "pos_emb", "layers.0.attn.mix", "layers.1.attn.R", "layers.0.attn.R1",
		"layers.1.attn.R2", "layers.0.attn.w2.weight", "layers.0.attn.w2.bias", "layers.1.attn.fa.weight",
		"layers.0.attn.fb.bias", "layers.0.attn.q.weight", "layers.1.attn.k.weight", "layers.0.attn.w1.weight",
		"layers.1.ln2.bias", "lnf.weight", "layers.0.fc1.bias"}
	for _, name := range names {
		p := m.Param(name)
		if p == nil {
			t.Fatalf("no parameter %s", name)
		}
		saved := append([]float32(nil), p.Grad...)
		for _, broken := range []string{"doubled", "negated", "zeroed"} {
			for i := range p.Grad {
				switch broken {
				case "doubled":
					p.Grad[i] = saved[i] * 2
				case "negated":
					p.Grad[i] = -saved[i]
				default:
					p.Grad[i] = 0
				}
			}
			bad, _, _ := verifyGrads(m, ws, in, tg, batch, loss, []*model.Param{p})
			if len(bad) == 0 {
				t.Errorf("%s: a %s gradient passed the check", name, broken)
			}
		}
		copy(p.Grad, saved)
	}
}

func gradsOf(m *model.Model) [][]float32 {
	var out [][]float32
	for _, p := range m.Params {
		out = append(out, append([]float32(nil), p.Grad...))
	}
	return out
}

// TestDeterminism: Forward+Backward give bit-identical losses, logits and
// gradients with 1, 2 and 3 workers.
func TestDeterminism(t *testing.T) {
	for _, name := range []string{"odd", "random_vanilla", "dense", "factorized_dense", "factorized_random", "fixed_random"} {
		t.Run(name, func(t *testing.T) {
			m := newModel(t, name, 1)
			perturb(m, 2)
			const batch = 3
			ws := m.NewWorkspace(batch)
			in, tg := tokens(4, batch, 37)
			var loss0 float64
			var logits0 []float32
			var grads0 [][]float32
			for _, w := range []int{1, 2, 3} {
				m.SetWorkers(w)
				loss := m.Forward(ws, in, tg, batch)
				logits := append([]float32(nil), ws.Logits(2, 36)...)
				m.Backward(ws)
				grads := gradsOf(m)
				if w == 1 {
					loss0, logits0, grads0 = loss, logits, grads
					continue
				}
				if math.Float64bits(loss) != math.Float64bits(loss0) {
					t.Fatalf("%d workers: loss %v, 1 worker: %v", w, loss, loss0)
				}
				for i := range logits {
					if math.Float32bits(logits[i]) != math.Float32bits(logits0[i]) {
						t.Fatalf("%d workers: logit %d = %v, 1 worker: %v", w, i, logits[i], logits0[i])
					}
				}
				for pi, g := range grads {
					for i := range g {
						if math.Float32bits(g[i]) != math.Float32bits(grads0[pi][i]) {
							t.Fatalf("%d workers: %s grad[%d] = %v, 1 worker: %v", w, m.Params[pi].Name, i, g[i], grads0[pi][i])
						}
					}
				}
			}
		})
	}
}

// TestNoAllocs: Forward+Backward allocate nothing once the workspace exists.
// (With 2 workers the Go runtime itself may, very rarely, allocate a
// goroutine-parking record; averaged over 10 steps that rounds to 0.)
func TestNoAllocs(t *testing.T) {
	for _, name := range []string{"odd", "vanilla", "dense"} {
		for _, workers := range []int{1, 2} {
			m := newModel(t, name, 1)
			m.SetWorkers(workers)
			const batch = 2
			ws := m.NewWorkspace(batch)
			in, tg := tokens(5, batch, 20)
			allocs := testing.AllocsPerRun(10, func() {
				m.Forward(ws, in, tg, batch)
				m.Backward(ws)
			})
			if allocs != 0 {
				t.Errorf("%s, %d workers: Forward+Backward allocate %v times per step", name, workers, allocs)
			}
		}
	}
}

// TestParams checks the card's names, shapes, flags and initialisation.
func TestParams(t *testing.T) {
	m := newModel(t, "odd", 7)
	s := m.Spec
	dh := s.DH()
	want := map[string][]int{"tok_emb": {256, 36}, "pos_emb": {60, 36}, "lnf.weight": {36}, "lnf.bias": {36}}
	for l := 0; l < s.Layers; l++ {
		pre := "layers." + string(rune('0'+l)) + "."
		for _, n := range []string{"ln1", "ln2"} {
			want[pre+n+".weight"] = []int{36}
			want[pre+n+".bias"] = []int{36}
		}
		lin := func(n string, in, out int) {
			want[pre+n+".weight"] = []int{out, in}
			want[pre+n+".bias"] = []int{out}
		}
		lin("fc1", 36, 144)
		lin("fc2", 144, 36)
		for _, n := range []string{"q", "k", "v", "o", "w1"} {
			lin("attn."+n, 36, 36)
		}
		lin("attn.w2", dh, 60)
		lin("attn.fa", dh, 6)
		lin("attn.fb", dh, 10)
		want[pre+"attn.R"] = []int{3, 60, 60}
		want[pre+"attn.R1"] = []int{3, 60, 5}
		want[pre+"attn.R2"] = []int{3, 60, 5}
		want[pre+"attn.mix"] = []int{5}
	}
	if len(m.Params) != len(want) {
		t.Errorf("%d params, want %d", len(m.Params), len(want))
	}
	total := 0
	for i, p := range m.Params {
		w, ok := want[p.Name]
		if !ok {
			t.Errorf("unexpected parameter %s", p.Name)
			continue
		}
		if len(w) != len(p.Shape) {
			t.Errorf("%s: shape %v, want %v", p.Name, p.Shape, w)
		}
		n := 1
		for j := range w {
			if j < len(p.Shape) && p.Shape[j] != w[j] {
				t.Errorf("%s: shape %v, want %v", p.Name, p.Shape, w)
			}
			n *= w[j]
		}
		total += n
		if len(p.Data) != n || len(p.Grad) != n {
			t.Errorf("%s: %d values, %d grads, want %d", p.Name, len(p.Data), len(p.Grad), n)
		}
		if p.Decay != (len(w) >= 2) || p.Frozen {
			t.Errorf("%s: Decay %v Frozen %v", p.Name, p.Decay, p.Frozen)
		}
		if m.Param(p.Name) != p {
			t.Errorf("Param(%q) is not Params[%d]", p.Name, i)
		}
		mean, sd := stats(p.Data)
		switch {
		case strings.HasPrefix(p.Name, "layers.") && strings.Contains(p.Name, ".ln") && strings.HasSuffix(p.Name, ".weight"),
			p.Name == "lnf.weight":
			if mean != 1 || sd != 0 {
				t.Errorf("%s: LayerNorm weight not 1 (mean %v sd %v)", p.Name, mean, sd)
			}
		case len(w) == 1: // biases, mix
			if mean != 0 || sd != 0 {
				t.Errorf("%s: not zero (mean %v sd %v)", p.Name, mean, sd)
			}
		default:
			if n > 300 && (math.Abs(sd-0.02) > 0.004 || math.Abs(mean) > 0.004) {
				t.Errorf("%s: mean %v sd %v, want N(0, 0.02²)", p.Name, mean, sd)
			}
		}
	}
	if m.NumParams() != total {
		t.Errorf("NumParams %d, want %d", m.NumParams(), total)
	}
	if m.Params[0].Name != "tok_emb" || m.Params[1].Name != "pos_emb" || m.Params[len(m.Params)-1].Name != "lnf.bias" {
		t.Errorf("order: %s %s ... %s", m.Params[0].Name, m.Params[1].Name, m.Params[len(m.Params)-1].Name)
	}
	if m.Param("layers.0.attn.u") != nil {
		t.Error("Param of an absent name is not nil")
	}

	// fixed_random: R frozen, no gradient, N(0, 1).
	f := newModel(t, "fixed_random", 7)
	r := f.Param("layers.2.attn.R")
	if r == nil || !r.Frozen || r.Grad != nil || !r.Decay {
		t.Fatalf("fixed_random R: %+v", r)
	}
	if mean, sd := stats(r.Data); math.Abs(sd-1) > 0.02 || math.Abs(mean) > 0.02 {
		t.Errorf("fixed_random R: mean %v sd %v, want N(0, 1)", mean, sd)
	}
	if p := newModel(t, "random", 7).Param("layers.0.attn.R"); p.Frozen || p.Grad == nil {
		t.Errorf("random R must be trained")
	}

	// Deterministic from the seed.
	a, b, c := newModel(t, "odd", 7), newModel(t, "odd", 7), newModel(t, "odd", 8)
	same, diff := true, false
	for i := range a.Params {
		for j := range a.Params[i].Data {
			same = same && a.Params[i].Data[j] == b.Params[i].Data[j]
			diff = diff || a.Params[i].Data[j] != c.Params[i].Data[j]
		}
	}
	if !same || !diff {
		t.Errorf("init: same seed equal %v, other seed differs %v", same, diff)
	}
}

func stats(x []float32) (mean, sd float64) {
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	for _, v := range x {
		sd += (float64(v) - mean) * (float64(v) - mean)
	}
	return mean, math.Sqrt(sd / float64(len(x)))
}

func TestNewErrors(t *testing.T) {
	k, err := kernels.Lookup("vanilla")
	if err != nil {
		t.Fatal(err)
	}
	s := k.Spec
	s.D = 64
	if _, err := model.New(s, k, 1); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("mismatched kernels: err %v", err)
	}
	aft := specs.Spec{Name: "aft", N: 16, D: 16, Heads: 2, Layers: 1, Variant: "aft_full", Vocab: 256, FFN: 64}
	if _, err := model.New(aft, k, 1); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("aft_full: err %v", err)
	}
	bad := k.Spec
	bad.Heads = 5
	if _, err := model.New(bad, k, 1); err == nil {
		t.Error("invalid spec accepted")
	}
	if _, err := model.New(k.Spec, nil, 1); err == nil {
		t.Error("nil kernels accepted")
	}
	broken := *k
	broken.VanillaLogitsBackW = nil
	if _, err := model.New(k.Spec, &broken, 1); err == nil || !strings.Contains(err.Error(), "VanillaLogitsBackW") {
		t.Errorf("missing kernel: err %v", err)
	}
}

// TestNoTargets: without targets Forward returns 0 and still gives the
// logits, which do not depend on the targets.
func TestNoTargets(t *testing.T) {
	m := newModel(t, "odd", 1)
	ws := m.NewWorkspace(2)
	in, tg := tokens(6, 2, 10)
	loss := m.Forward(ws, in, tg, 2)
	want := append([]float32(nil), ws.Logits(1, 9)...)
	if got := m.Forward(ws, in, nil, 2); got != 0 {
		t.Errorf("loss without targets = %v", got)
	}
	got := ws.Logits(1, 9)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("logit %d: %v without targets, %v with", i, got[i], want[i])
		}
	}
	// The loss is the mean cross-entropy of those logits.
	sum := 0.0
	for b := 0; b < 2; b++ {
		for i := 0; i < 10; i++ {
			l := ws.Logits(b, i)
			mx := math.Inf(-1)
			for _, v := range l {
				mx = math.Max(mx, float64(v))
			}
			s := 0.0
			for _, v := range l {
				s += math.Exp(float64(v) - mx)
			}
			sum += mx + math.Log(s) - float64(l[tg[b*10+i]])
		}
	}
	// The kernels sum each row's exponentials in float32 (SoftmaxStats): the
	// relative error of the sum, at most about (vocab+8)·2⁻²⁴, is the
	// absolute error of its log.
	if math.Abs(sum/20-loss) > 264*0x1p-24 {
		t.Errorf("loss %v, mean cross-entropy of the logits %v", loss, sum/20)
	}
	defer func() {
		if recover() == nil {
			t.Error("Backward after a Forward without targets did not panic")
		}
	}()
	m.Backward(ws)
}

// TestOverfit trains the small spec with Adam on a repeating text and
// expects the loss to fall far below ln 256 ≈ 5.55.
func TestOverfit(t *testing.T) {
	m := newModel(t, "small", 1)
	const batch, steps = 4, 120
	n := m.Spec.N
	text := []byte(strings.Repeat("abc", 200))
	ws := m.NewWorkspace(batch)
	in := make([]int32, batch*n)
	tg := make([]int32, batch*n)
	rng := rand.New(rand.NewPCG(1, 2))
	mom := make([][]float32, len(m.Params))
	vel := make([][]float32, len(m.Params))
	for i, p := range m.Params {
		mom[i] = make([]float32, len(p.Data))
		vel[i] = make([]float32, len(p.Data))
	}
	const lr, b1, b2, eps = 3e-3, 0.9, 0.999, 1e-8
	var first, loss float64
	for step := 1; step <= steps; step++ {
		for b := 0; b < batch; b++ {
			o := rng.IntN(len(text) - n - 1)
			for i := 0; i < n; i++ {
				in[b*n+i] = int32(text[o+i])
				tg[b*n+i] = int32(text[o+i+1])
			}
		}
		loss = m.Forward(ws, in, tg, batch)
		if step == 1 {
			first = loss
		}
		m.Backward(ws)
		c1 := 1 - math.Pow(b1, float64(step))
		c2 := 1 - math.Pow(b2, float64(step))
		for pi, p := range m.Params {
			if p.Frozen {
				continue
			}
			for i, g := range p.Grad {
				mom[pi][i] = b1*mom[pi][i] + (1-b1)*g
				vel[pi][i] = b2*vel[pi][i] + (1-b2)*g*g
				mh := float64(mom[pi][i]) / c1
				vh := float64(vel[pi][i]) / c2
				p.Data[i] -= float32(lr * mh / (math.Sqrt(vh) + eps))
			}
		}
	}
	t.Logf("loss %.4f → %.4f in %d steps", first, loss, steps)
	if !(first > 4.5) || !(loss < 0.2) {
		t.Fatalf("loss %.4f → %.4f: did not overfit the repeating text", first, loss)
	}
}

// TestWorkersStop: SetWorkers replaces the pool, and a Model that is no
// longer referenced stops its goroutines.
func TestWorkersStop(t *testing.T) {
	// Let earlier tests' models be collected first.
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	base := runtime.NumGoroutine()
	func() {
		m := newModel(t, "odd", 1)
		m.SetWorkers(4)
		m.SetWorkers(3)
		if m.Workers() != 3 {
			t.Errorf("Workers() = %d after SetWorkers(3)", m.Workers())
		}
		// The replaced pools' goroutines exit shortly.
		for i := 0; i < 100 && runtime.NumGoroutine()-base != 2; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if got := runtime.NumGoroutine() - base; got != 2 {
			t.Errorf("3 workers: %d extra goroutines, want 2", got)
		}
		ws := m.NewWorkspace(1)
		in, tg := tokens(1, 1, 5)
		m.Forward(ws, in, tg, 1)
	}()
	for i := 0; i < 100 && runtime.NumGoroutine() > base; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := runtime.NumGoroutine() - base; got > 0 {
		t.Errorf("%d goroutines left after the model was dropped", got)
	}
}

// TestNewMaskMismatch: New refuses kernels whose mask differs from the
// spec's (masked kernels under a bidirectional spec, unmasked ones under a
// causal spec), naming "causal"; a different task or number of classes on
// kernels of the same mask is accepted (a classifier twin of a language
// model runs on its kernels).
func TestNewMaskMismatch(t *testing.T) {
	for _, name := range []string{"odd", "enc_odd", "odd_aft_full", "odd_enc_aft_full", "odd_linear", "odd_enc_linear", "odd_aft_conv", "odd_enc_aft_conv"} {
		k, err := kernels.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		flipped := k.Spec
		flipped.Bidirectional = !flipped.Bidirectional
		flipped.Task, flipped.Classes = specs.TaskClassify, 3 // valid either way
		if err := flipped.Validate(); err != nil {
			t.Fatalf("%s: the flipped spec is invalid: %v", name, err)
		}
		_, err = model.New(flipped, k, 1)
		if err == nil || !strings.Contains(err.Error(), "does not match") || !strings.Contains(err.Error(), fmt.Sprintf("causal %t", flipped.Causal())) {
			t.Errorf("%s: spec causal %t on kernels causal %t: err %v", name, flipped.Causal(), k.Spec.Causal(), err)
		}
		same := k.Spec
		same.Task, same.Classes = specs.TaskClassify, 5
		if _, err := model.New(same, k, 1); err != nil {
			t.Errorf("%s: a classifier of 5 classes on its kernels: %v", name, err)
		}
	}
}
