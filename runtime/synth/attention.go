package synth

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/specs"
)

// ErrNoAttention is matched (errors.Is) by the error of Model.Attention
// for a variant without attention weights (aft_simple).
var ErrNoAttention = errors.New("the variant has no attention weights")

// Attention is a model's attention weights for one prompt, per layer and
// head, as Model.Attention returns them.
type Attention struct {
	Spec   specs.Spec
	Step   int           // the checkpoint's training steps
	Prompt []byte        // the bytes the model saw: the last n bytes of the prompt
	Kind   AttentionKind // which weights the maps are
	// What says in one sentence what the maps show (which weights, after
	// which normalisation, whether they depend on the input).
	What string
	// InputDependent is false when the maps do not depend on the prompt
	// (random, fixed_random, factorized_random, AFT's position biases);
	// the prompt then only sets their size.
	InputDependent bool
	// Maps holds, per layer, one map per head, or a single map (Head −1)
	// when the heads share it (aft_full's and aft_local's bias w).
	Maps [][]AttentionMap
}

// AttentionKind says which weights an Attention's maps are.
type AttentionKind int

const (
	// AttentionProbs: the synthesizer family, vanilla and their mixtures:
	// the attention probabilities softmax(B), causal.
	AttentionProbs AttentionKind = iota + 1
	// AttentionLinear: linear attention's implicit weights
	// φ(Q_i)·φ(K_j) / (Σ_{j'≤i} φ(Q_i)·φ(K_j') + 1e-6), j ≤ i.
	AttentionLinear
	// AttentionPositionBias: aft_full, aft_local and aft_conv: the learned
	// position bias normalised over the keys (softmax over j ≤ i), the
	// weighting AFT gives the values when every key is equal;
	// input-independent.
	AttentionPositionBias
)

// attentionKinds maps the network's kinds to the API's.
var attentionKinds = map[model.AttentionKind]AttentionKind{
	model.AttentionProbs:        AttentionProbs,
	model.AttentionLinear:       AttentionLinear,
	model.AttentionPositionBias: AttentionPositionBias,
}

func (k AttentionKind) String() string {
	switch k {
	case AttentionProbs:
		return "probabilities"
	case AttentionLinear:
		return "linear"
	case AttentionPositionBias:
		return "position bias"
	}
	return fmt.Sprintf("AttentionKind(%d)", int(k))
}

// AttentionMap is the attention of one head of one layer: a T×T matrix,
// row i the weights query position i gives the key positions j ≤ i (0 for
// j > i, the causal mask); each row sums to 1 (to 1 − ε for linear
// attention's 1e-6).
type AttentionMap struct {
	Layer, Head int // Head −1: shared by all heads
	T           int
	P           []float32 // row-major, T·T
}

// At is the weight of key position j for query position i.
func (a AttentionMap) At(i, j int) float32 { return a.P[i*a.T+j] }

// Attention runs the model on prompt (its last n bytes) and returns the
// attention weights of every layer and head, after the softmax or the
// variant's normalisation: the probabilities of the synthesizer family,
// vanilla and their mixtures, linear attention's implicit weights, AFT's
// normalised position biases (Attention.What says which). A variant
// without attention weights (aft_simple) gives an error matching
// ErrNoAttention.
func (m *Model) Attention(ctx context.Context, prompt []byte) (*Attention, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("attention: %w", context.Cause(ctx))
	}
	s := m.net.Spec
	kind := m.net.AttentionKind()
	if kind == model.AttentionNone {
		return nil, fmt.Errorf("attention of spec %s: variant %s: %w (aft_simple's position bias is identically 0, so every query weights the keys only by exp(K_j), per channel)", s.Name, s.Variant, ErrNoAttention)
	}
	if len(prompt) == 0 {
		return nil, errors.New("attention: the prompt must not be empty")
	}
	if err := data.CheckVocab("prompt", prompt, s.Vocab); err != nil {
		return nil, fmt.Errorf("attention: %w", err)
	}
	text := prompt[max(0, len(prompt)-s.N):]
	in := make([]int32, len(text))
	for i, c := range text {
		in[i] = int32(c)
	}
	ws := m.net.NewWorkspace(1)
	if m.IsClassifier() {
		m.net.ForwardClassify(ws, in, nil, 1)
	} else {
		m.net.Forward(ws, in, nil, 1)
	}
	what, dep := describeAttention(s, kind)
	a := &Attention{Spec: s, Step: m.step, Prompt: append([]byte(nil), text...), Kind: attentionKinds[kind], What: what, InputDependent: dep}
	heads := s.Heads
	shared := s.Variant == "aft_full" || s.Variant == "aft_local"
	if shared {
		heads = 1
	}
	t := len(text)
	for l := 0; l < s.Layers; l++ {
		var row []AttentionMap
		for h := 0; h < heads; h++ {
			p := make([]float32, t*t)
			m.net.AttentionMap(ws, 0, l, h, p)
			hd := h
			if shared {
				hd = -1
			}
			row = append(row, AttentionMap{Layer: l, Head: hd, T: t, P: p})
		}
		a.Maps = append(a.Maps, row)
	}
	return a, nil
}

// logitNames are the synthesizer components' logits as the card writes
// them, and whether they depend on the input.
var logitNames = map[string]struct {
	logits string
	input  bool
}{
	"vanilla":           {"Q·Kᵀ/√dh", true},
	"dense":             {"w2(relu(w1(x)))", true},
	"random":            {"the learned R", false},
	"fixed_random":      {"the frozen random R", false},
	"factorized_random": {"R1·R2ᵀ", false},
	"factorized_dense":  {"fa(G)⊙fb(G) (G = relu(w1(x)))", true},
}

// describeAttention is Attention.What and InputDependent for spec s.
func describeAttention(s specs.Spec, kind model.AttentionKind) (string, bool) {
	switch kind {
	case model.AttentionLinear:
		return "linear attention's implicit weights φ(Q_i)·φ(K_j) / Σ_{j≤i} φ(Q_i)·φ(K_j) (φ = elu+1), causal, for this prompt", true
	case model.AttentionPositionBias:
		switch s.Variant {
		case "aft_conv":
			return fmt.Sprintf("AFT-conv's learned position bias u[h, i−j] (window %d, 0 outside) normalised per query: softmax over j ≤ i; input-independent (the weights with equal keys)", s.Window), false
		case "aft_local":
			return fmt.Sprintf("AFT-local's learned position bias w[i,j] (window %d, 0 outside; shared by the heads) normalised per query: softmax over j ≤ i; input-independent (the weights with equal keys)", s.Window), false
		}
		return "AFT-full's learned position bias w[i,j] (shared by the heads) normalised per query: softmax over j ≤ i; input-independent (the weights with equal keys)", false
	}
	var parts []string
	dep := false
	for _, c := range s.Components() {
		ln := logitNames[c]
		parts = append(parts, ln.logits)
		dep = dep || ln.input
	}
	logits := parts[0]
	if len(parts) > 1 {
		logits = "the mixture Σ w_m·B_m of " + strings.Join(parts, ", ") + " (w = softmax(mix))"
	}
	what := "attention probabilities softmax(" + logits + "), causal"
	if dep {
		what += ", for this prompt"
	} else {
		what += ": input-independent (the prompt only sets the size)"
	}
	return what, dep
}
