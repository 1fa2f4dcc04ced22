package cli

import (
	"fmt"

	"github.com/synthgen/synthgen/internal/plots"
	"github.com/synthgen/synthgen/runtime/synth"
)

func attnCmd(e *env, args []string) error {
	fs := newFlagSet(e, "attn", "Runs a checkpoint on a prompt and writes its attention weights (after the softmax or the\n"+
		"variant's normalisation) as PNG heatmaps, one grid per layer with a panel per head, into -out:\n"+
		"<spec>-layer<l>.png. What a variant's maps are is printed and written in each picture's title:\n"+
		"the probabilities of vanilla, dense, factorized and mixtures for the prompt; softmax(R) of\n"+
		"random and fixed_random (input-independent); linear attention's implicit weights; AFT's\n"+
		"normalised position biases. aft_simple has none.")
	var ckpt, prompt, dataPath, out string
	ckptUsage(fs, &ckpt)
	fs.StringVar(&prompt, "prompt", "", "text the model reads (its last n bytes) (default: the first n bytes of -data's held-out part)")
	fs.StringVar(&dataPath, "data", "", "text whose held-out part gives the default prompt (default: Go's Isaac.Newton-Opticks.txt)")
	fs.StringVar(&out, "out", "attn", "output `folder` (created if missing)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := needCkpt(ckpt); err != nil {
		return err
	}
	m, err := synth.Load(e.context(), ckpt)
	if err != nil {
		return err
	}
	text := []byte(prompt)
	if prompt == "" {
		val, err := synth.HeldOut(dataPath, m.Spec())
		if err != nil {
			return fmt.Errorf("default prompt: %w", err)
		}
		text = val[:m.Spec().N]
	}
	a, err := m.Attention(e.context(), text)
	if err != nil {
		return fmt.Errorf("%s: %w", ckpt, err)
	}
	layers, err := attentionLayers(a)
	if err != nil {
		return fmt.Errorf("%s: %w", ckpt, err)
	}
	files, err := plots.AttentionPNGs(out, a.Spec.Name, layers)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "%s (spec %s, %s, step %d), %d-byte prompt %q\n", ckpt, a.Spec.Name, a.Spec.Variant, a.Step, len(a.Prompt), a.Prompt)
	fmt.Fprintf(e.out, "shown: %s\n", a.What)
	for _, f := range files {
		fmt.Fprintf(e.out, "wrote %s\n", f)
	}
	return nil
}

// attentionLayers lays a's maps out as plots' pictures: one per layer, a
// panel per head (or one shared by the heads), titled with the spec, the
// step, what the maps show and the prompt.
func attentionLayers(a *synth.Attention) ([]plots.AttentionLayer, error) {
	var layers []plots.AttentionLayer
	for l, layer := range a.Maps {
		var hms []plots.Heatmap
		for _, m := range layer {
			title := fmt.Sprintf("layer %d, head %d", m.Layer, m.Head)
			if m.Head < 0 {
				title = fmt.Sprintf("layer %d, all heads (shared)", m.Layer)
			}
			hm, err := plots.CausalHeatmap(title, m.T, m.P)
			if err != nil {
				return nil, err
			}
			hms = append(hms, hm)
		}
		prompt := "prompt: " + quote(a.Prompt, 60)
		if !a.InputDependent {
			prompt = fmt.Sprintf("shown for t = %d", len(a.Prompt))
		}
		title := fmt.Sprintf("%s (%s), step %d, layer %d: %s\n%s", a.Spec.Name, a.Spec.Variant, a.Step, l, a.What, prompt)
		layers = append(layers, plots.AttentionLayer{Title: title, Maps: hms})
	}
	return layers, nil
}

// quote is b as a Go string literal, cut to about n characters.
func quote(b []byte, n int) string {
	q := []rune(fmt.Sprintf("%q", b))
	if len(q) > n {
		return string(q[:n]) + "…"
	}
	return string(q)
}
