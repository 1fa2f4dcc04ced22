package cli

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/synth"
)

func predictCmd(e *env, args []string) error {
	fs := newFlagSet(e, "predict", "Classifies texts with a classifier's checkpoint, printing for each text its most likely\nlabel and every label's probability (class order), tab-separated.")
	var ckpt, text, file string
	var workers int
	ckptUsage(fs, &ckpt)
	fs.StringVar(&text, "text", "", "the text to classify")
	fs.StringVar(&file, "file", "", "a `file` of texts to classify, one a line (blank lines skipped)")
	fs.IntVar(&workers, "workers", 0, "goroutine workers (0: GOMAXPROCS)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := needCkpt(ckpt); err != nil {
		return err
	}
	switch {
	case (text == "") == (file == ""):
		return fmt.Errorf("give one of -text and -file")
	case workers < 0 || workers > synth.MaxWorkers():
		return fmt.Errorf("-workers %d must satisfy 0 ≤ workers ≤ %d (%d per CPU)", workers, synth.MaxWorkers(), synth.WorkersPerCPU)
	}
	m, err := synth.Load(e.context(), ckpt)
	if err != nil {
		return err
	}
	if !m.IsClassifier() {
		return fmt.Errorf("-ckpt %s: spec %s is a language model, not a classifier (use synth sample)", ckpt, m.Spec().Name)
	}
	m.SetWorkers(workers)
	var texts [][]byte
	var lines []int
	if text != "" {
		texts = [][]byte{[]byte(text)}
	} else {
		b, err := data.ReadFile(file)
		if err != nil {
			return err
		}
		for i, l := range bytes.Split(b, []byte("\n")) {
			l = bytes.TrimSuffix(l, []byte("\r"))
			if len(l) > 0 {
				texts, lines = append(texts, l), append(lines, i+1)
			}
		}
		if len(texts) == 0 {
			return fmt.Errorf("-file %s: no texts", file)
		}
	}
	preds, err := m.Predict(e.context(), texts)
	if err != nil {
		var i int
		if file != "" && len(lines) > 0 {
			if _, serr := fmt.Sscanf(err.Error(), "text %d", &i); serr == nil && i >= 1 && i <= len(lines) {
				return fmt.Errorf("-file %s line %d: %s", file, lines[i-1], strings.TrimPrefix(err.Error(), fmt.Sprintf("text %d", i)))
			}
			return fmt.Errorf("-file %s: %w", file, err)
		}
		return fmt.Errorf("-text: %w", err)
	}
	labels := m.Labels()
	fmt.Fprintf(e.out, "label\t%s\n", strings.Join(labels, "\t"))
	for _, p := range preds {
		fmt.Fprint(e.out, p.Label)
		for _, q := range p.Probs {
			fmt.Fprintf(e.out, "\t%.4f", q)
		}
		fmt.Fprintln(e.out)
	}
	return nil
}
