package model

import (
	"fmt"
	"math"
)

// AttentionKind says what AttentionMap reads for a model's variant.
type AttentionKind int

const (
	// AttentionNone: the variant has no attention weights (aft_simple,
	// whose position bias is identically 0).
	AttentionNone AttentionKind = iota
	// AttentionProbs: the synthesizer family, vanilla and their mixtures:
	// the probabilities A = softmax(B) of the last Forward, causal (over
	// every key j < t for a bidirectional spec, "causal": false). They
	// depend on the input, except for random and fixed_random, whose B is
	// R itself.
	AttentionProbs
	// AttentionLinear: linear attention's implicit weights of the last
	// Forward, φ(Q_i)·φ(K_j) / (Σ_{j'≤i} φ(Q_i)·φ(K_j') + 1e-6), j ≤ i
	// (a bidirectional spec: over all j, j' < t).
	AttentionLinear
	// AttentionPositionBias: aft_full, aft_local and aft_conv: the
	// learned position bias b_ij normalised over the keys, softmax_{j≤i}
	// b_ij, which is the weighting AFT gives the values when every key
	// is equal (a bidirectional spec: softmax_{j<t}, the windows
	// |i − j| < window). It does not depend on the input; aft_full's and
	// aft_local's is shared by the heads, aft_conv's is per head.
	AttentionPositionBias
)

// AttentionKind is what AttentionMap returns for this model's variant.
func (m *Model) AttentionKind() AttentionKind {
	switch m.kind {
	case kindSynth:
		return AttentionProbs
	case kindLinear:
		return AttentionLinear
	case kindAFTFull, kindAFTLocal, kindAFTConv:
		return AttentionPositionBias
	}
	return AttentionNone
}

// AttentionMap writes the attention weights of head h of layer l for
// sequence s of the last Forward on ws into dst, as a t×t row-major matrix
// (t the sequence length of that Forward): dst[i·t+j] is the weight of key
// position j for query position i, 0 for j > i unless the spec is
// bidirectional; see AttentionKind for what the weights are. It returns t, or 0 (writing nothing) when the variant
// has no attention weights. It must follow a Forward on ws (and precede
// any Backward on it, which overwrites the probabilities); it costs the
// training passes nothing (the bf16 strip path, which from N 512 keeps no
// probabilities, makes them again for it). dst must hold t·t values.
func (m *Model) AttentionMap(ws *Workspace, s, l, h int, dst []float32) int {
	if ws == nil || ws.m != m {
		panic("model: AttentionMap: the workspace was not made by this model's NewWorkspace")
	}
	if !ws.fwdDone || ws.backDone {
		panic("model: AttentionMap: no Forward on this workspace (or a Backward since)")
	}
	if s < 0 || s >= ws.b || l < 0 || l >= len(m.layers) || h < 0 || h >= m.heads {
		panic(fmt.Sprintf("model: AttentionMap: sequence %d, layer %d, head %d out of range (%d, %d, %d)", s, l, h, ws.b, len(m.layers), m.heads))
	}
	kind := m.AttentionKind()
	if kind == AttentionNone {
		return 0
	}
	t, n := ws.t, m.n
	if len(dst) < t*t {
		panic(fmt.Sprintf("model: AttentionMap: dst holds %d values, want t·t = %d", len(dst), t*t))
	}
	dst = dst[:t*t]
	clear(dst)
	ly, lw := &m.layers[l], &ws.lay[l]
	switch kind {
	case AttentionProbs:
		if ws.stripsP && m.stripsRecompute() { // not kept: made again, as the forward made them
			m.stripProbs(ws, l, s*m.heads+h, dst)
			break
		}
		if ws.sharedP { // not kept: made again, as the forward made them
			m.sharedProbs(ws, l, h, dst)
			break
		}
		nn := n * n
		a := lw.a[(s*m.heads+h)*nn:]
		for i := 0; i < t; i++ {
			keys := i + 1
			if !m.Spec.Causal() {
				keys = t
			}
			copy(dst[i*t:i*t+keys], a[i*n:i*n+keys])
		}
	case AttentionLinear:
		d, dh := m.d, m.dh
		base := s*t*d + h*dh
		for i := 0; i < t; i++ {
			fq := lw.q[base+i*d : base+i*d+dh]
			row := dst[i*t : i*t+m.aftKeys(i, t)]
			sum := 0.0
			for j := range row {
				fk := lw.k[base+j*d : base+j*d+dh]
				dot := 0.0
				for c, x := range fq {
					dot += float64(x) * float64(fk[c])
				}
				row[j] = float32(dot)
				sum += dot
			}
			r := 1 / (sum + 1e-6)
			for j := range row {
				row[j] = float32(float64(row[j]) * r)
			}
		}
	case AttentionPositionBias:
		uw, u0 := m.uWidth(), 0 // u[h, i − j + u0]
		if m.Spec.Bidirectional {
			u0 = m.window - 1
		}
		bias := func(i, j int) float64 {
			dist := i - j
			if dist < 0 {
				dist = -dist // j > i: only a bidirectional spec's rows reach it
			}
			switch m.kind {
			case kindAFTFull:
				return float64(ly.aw.Data[i*n+j])
			case kindAFTLocal:
				if dist < m.window {
					return float64(ly.aw.Data[i*n+j])
				}
			case kindAFTConv:
				if dist < m.window {
					return float64(ly.au.Data[h*uw+i-j+u0])
				}
			}
			return 0
		}
		for i := 0; i < t; i++ {
			row := dst[i*t : i*t+m.aftKeys(i, t)]
			mx := math.Inf(-1)
			for j := range row {
				mx = math.Max(mx, bias(i, j))
			}
			sum := 0.0
			for j := range row {
				sum += math.Exp(bias(i, j) - mx)
			}
			for j := range row {
				row[j] = float32(math.Exp(bias(i, j)-mx) / sum)
			}
		}
	}
	return t
}
