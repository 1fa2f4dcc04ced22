package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/listops"
)

// listopsFlags maps listops.Options' fields to synth listops' flags.
var listopsFlags = map[string]string{"MaxDepth": "depth", "MaxArgs": "args", "MinLen": "min-len", "MaxLen": "max-len"}

func listopsCmd(e *env, args []string) error {
	fs := newFlagSet(e, "listops", `Generates Long Range Arena's ListOps task from a seed: nested MAX, MIN, MED (median) and SM
(sum mod 10) expressions over the digits 0-9, labelled with their value, written as
train, validation and test files in a labelled format (label<TAB>text by default).
One byte per LRA token, so a sequence's length is its token count:
  X = [MAX   N = [MIN   D = [MED   S = [SM   ] = ]   0-9 = the digits
LRA's "[MAX 2 9 [MIN 4 7 ] 0 ]" is "X29N47]0]". The same flags give the same files.`)
	var (
		out, format                  string
		seed                         uint64
		train, val, test             int
		minLen, maxLen, depth, nargs int
		force                        bool
	)
	fs.StringVar(&out, "out", "listops", "output `folder` (created if absent) for train.<format>, val.<format> and test.<format>")
	fs.Uint64Var(&seed, "seed", 1, "random seed: the same seed and flags write the same files")
	fs.IntVar(&train, "train", 96000, "training sequences (LRA: 96000)")
	fs.IntVar(&val, "val", 2000, "validation sequences (LRA: 2000; 0: no file)")
	fs.IntVar(&test, "test", 2000, "test sequences (LRA: 2000; 0: no file)")
	fs.IntVar(&minLen, "min-len", listops.DefaultMinLen, "shortest sequence in bytes (tokens), inclusive")
	fs.IntVar(&maxLen, "max-len", listops.DefaultMaxLen, "longest sequence in bytes (tokens), inclusive; at most the model's n to train on the files")
	fs.IntVar(&depth, "depth", listops.DefaultMaxDepth, "tree depth bound, the root at depth 1 (LRA's max_depth: 10 allows 9 nested operators)")
	fs.IntVar(&nargs, "args", listops.DefaultMaxArgs, "most arguments per operator, ≥ 2")
	fs.StringVar(&format, "format", "tsv", "file format: tsv (label<TAB>text), csv (label,text) or jsonl ({\"label\": …, \"text\": …})")
	fs.BoolVar(&force, "force", false, "replace existing files in -out (without it, an existing file is an error and nothing is written)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		v    int
		min  int
	}{{"train", train, 0}, {"val", val, 0}, {"test", test, 0}, {"min-len", minLen, 1}, {"max-len", maxLen, 1}, {"depth", depth, 1}, {"args", nargs, 2}} {
		if c.v < c.min {
			return fmt.Errorf("-%s %d must be ≥ %d", c.name, c.v, c.min)
		}
	}
	if train == 0 && val == 0 && test == 0 {
		return errors.New("-train, -val and -test are all 0: nothing to write")
	}
	f, err := data.ParseFormat(format)
	if err != nil || f == data.FormatAuto {
		return fmt.Errorf("-format %q: must be tsv, csv or jsonl", format)
	}
	o := listops.Options{MaxDepth: depth, MaxArgs: nargs, MinLen: minLen, MaxLen: maxLen}
	if err := o.Check(); err != nil {
		var oe *listops.OptionError
		if errors.As(err, &oe) {
			return fmt.Errorf("-%s %d: %s", listopsFlags[oe.Option], oe.Value, strings.ReplaceAll(oe.Rule, "MinLen", "-min-len"))
		}
		return err
	}
	counts := listops.Counts{Train: train, Val: val, Test: test}
	if err := listops.CheckFiles(out, counts, f, force); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "listops: seed %d, depth ≤ %d, ≤ %d arguments, lengths %d…%d, %d/%d/%d sequences (train/val/test)\n",
		seed, depth, nargs, minLen, maxLen, train, val, test)
	s, err := listops.Generate(seed, o, counts)
	if err != nil {
		return err
	}
	files, err := listops.WriteFiles(out, s, f, force)
	if err != nil {
		return err
	}
	for _, file := range files {
		st := file.Stats
		fmt.Fprintf(e.out, "wrote %s: %d sequences, lengths %d…%d (mean %.1f), values 0…9: %s\n",
			file.Path, st.Count, st.MinLen, st.MaxLen, st.MeanLen, strings.Trim(fmt.Sprint(st.Labels), "[]"))
	}
	return nil
}
